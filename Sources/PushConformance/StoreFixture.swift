import PushClock
import PushSession
import PushWire

/// What the store cases keep doing: a provider and a device session, tokens for the
/// run's user, other users and expired ones, FETCH, STATUS and SYNC in full.
struct StoreFixture {
    let ctx: CaseContext
    let provider: WireSession
    let device: WireSession
    let user: String
    /// A valid fetch token of the run's user for its enrolled reader device.
    let token: [UInt8]
    let deviceID: String

    init(_ ctx: CaseContext) throws(CaseStop) {
        self.ctx = ctx
        user = try ctx.user()
        deviceID = try ctx.readerDevice()
        provider = try ctx.storeProvider()
        device = try ctx.storeDevice()
        token = try ctx.token(user: user, device: deviceID)
    }

    /// A token of another user, who cannot read the run's user's payloads.
    func otherUserToken() throws(CaseStop) -> [UInt8] {
        try ctx.otherUserToken()
    }

    /// A token of the run's user for another of its devices, enrolled for the case.
    func secondDeviceToken() throws(CaseStop) -> [UInt8] {
        try ctx.token(user: user, device: try ctx.enrolledDevice().deviceID)
    }

    func expiredToken() throws(CaseStop) -> [UInt8] {
        try ctx.token(user: user, device: deviceID, expiresInMs: -60_000)
    }

    func store(ttl: UInt32 = 600, readLimit: UInt32 = 0, payload: [UInt8]? = nil) throws(CaseStop) -> StoreOK {
        try ctx.store(on: provider, payload: payload, user: user, ttl: ttl, readLimit: readLimit)
    }

    /// A payload that has been stored and recalled: gone, but still known.
    func recalled() throws(CaseStop) -> PayloadID {
        let id = try store().id
        let answer = try provider.request(.recall(Recall(id: id)))
        guard case .recallOK = answer else { throw .fail("RECALL of a fresh payload was answered \(describe(answer))") }
        return id
    }

    func fetch(_ id: PayloadID, token: [UInt8]?) throws(CaseStop) -> Message {
        try device.request(.fetch(Fetch(id: id, token: token)))
    }

    func fetchRefused(_ id: PayloadID, token: [UInt8]?, _ status: Status, _ what: String) throws(CaseStop) {
        try Expect.error(try fetch(id, token: token), status, what)
    }

    func status(_ id: PayloadID) throws(CaseStop) -> StatusOK {
        let answer = try provider.request(.status(StatusRequest(id: id)))
        guard case .statusOK(let status) = answer else { throw .fail("STATUS of a known payload was answered \(describe(answer))") }
        try Expect.equal(status.id, id, "STATUS_OK id")
        return status
    }

    /// Polls STATUS until `done` holds, for up to three seconds: fetch statistics may be
    /// written after the FETCH is answered ([4.8-3]).
    func status(_ id: PayloadID, until done: (StatusOK) -> Bool) throws(CaseStop) -> StatusOK {
        let deadline = Clocks.monotonicMilliseconds() + 3_000
        var last = try status(id)
        while !done(last) && Clocks.monotonicMilliseconds() < deadline {
            Pause.sleep(ms: 50)
            last = try status(id)
        }
        return last
    }

    /// Every id SYNC lists for `token`, following cursors; nil past `maxPages` pages.
    func syncAll(token: [UInt8], limit: UInt32 = 1000, maxPages: Int = 100) throws(CaseStop) -> [PayloadID]? {
        var ids: [PayloadID] = []
        var cursor: UInt64 = 0
        for _ in 0..<maxPages {
            let answer = try device.request(.sync(Sync(token: token, cursor: cursor, limit: limit)))
            guard case .syncOK(let page) = answer else { throw .fail("SYNC was answered \(describe(answer))") }
            try Expect.that(page.ids.count <= Int(max(1, min(limit, 1000))), "SYNC with limit \(limit) returned \(page.ids.count) ids")
            ids += page.ids
            guard page.hasMore else { return ids }
            cursor = page.cursor
        }
        return nil
    }

    func syncAllOrSkip(token: [UInt8], limit: UInt32 = 1000, maxPages: Int = 100) throws(CaseStop) -> [PayloadID] {
        guard let ids = try syncAll(token: token, limit: limit, maxPages: maxPages) else {
            throw .skip("the user has more unread payloads than \(maxPages) SYNC pages of \(limit); use a dedicated user")
        }
        return ids
    }
}

/// LOGIN for the run's user with `device`, which must be enrolled for it. RATE_LIMITED is a legal answer the suite cannot work
/// around (earlier runs may have used up the store's allowance), so it SKIPs.
/// `key`: the device key the LOGIN registers ([4.6-5]); a suite-2 key needs a frame above
/// the 1024-byte floor, so the session proposes 4096 bytes then.
func logIn(_ ctx: CaseContext, device: String, key: DevicePublicKey? = nil) throws(CaseStop) -> (LoginOK, WireSession) {
    let password = try ctx.password()
    let user = try ctx.user()
    let session = try ctx.storeDevice(maxFrame: key?.suite == .xwing ? 4096 : nil)
    // Cases of one run fail LOGINs for its user on purpose (4.6-2, 4.6-4), and runs and
    // shares go side by side from one address: the pair's hold after them ([8-10]) is
    // waited out, as a client would, for as long as the failed-token window.
    let login = Login(user: user, password: password, deviceID: device, deviceKey: key)
    var answer = try session.request(.login(login))
    var waited: Int64 = 0
    while case .error(let error) = answer, error.status == .rateLimited, waited < WireSession.failedTokenWindowMs {
        Pause.sleep(ms: 1_000)
        waited += 1_000
        answer = try session.request(.login(login))
    }
    switch answer {
    case .loginOK(let ok):
        return (ok, session)
    case .error(let error) where error.status == .rateLimited:
        throw .skip("LOGIN was RATE_LIMITED (failed logins from this host or for this user within the store's window); try again later")
    default:
        throw .fail("LOGIN with the user's password and the enrolled device \(device) was answered \(describe(answer))"
                    + " (the device must be enrolled for the user in the registry of the store under test)")
    }
}
