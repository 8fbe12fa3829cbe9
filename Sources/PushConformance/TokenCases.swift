import PushClock
import PushSecurity
import PushSession
import PushWire

/// How the store verifies fetch tokens (section 7.2, 7.3), judged through SYNC: the
/// cheapest request that checks a token and nothing else.
///
/// A token is accepted only for an existing user and a device enrolled for it ([7.3-3]),
/// so the tokens meant to pass are made for the run's user and its enrolled reader
/// device, and the ones meant to fail differ from those in the one respect under test.
enum TokenCases {
    /// The run's user and reader device when there are both, else fresh names (whose
    /// tokens only ever fail, which is all the refusal-only cases need).
    static func subject(_ ctx: CaseContext) -> (user: String, device: String) {
        if let user = try? ctx.user(), let device = try? ctx.readerDevice() { return (user, device) }
        return (ctx.unique("user"), ctx.unique("dev"))
    }

    /// SYNC with `token` on a device connection; returns the answer.
    static func sync(_ ctx: CaseContext, _ session: WireSession, _ token: [UInt8]) throws(CaseStop) -> Message {
        try session.request(.sync(Sync(token: token, limit: 1)))
    }

    static func accepted(_ ctx: CaseContext, _ session: WireSession, _ token: [UInt8], _ what: String) throws(CaseStop) {
        let answer = try sync(ctx, session, token)
        guard case .syncOK = answer else { throw .fail("SYNC with \(what) was answered \(describe(answer)), expected SYNC_OK") }
    }

    static func refused(_ ctx: CaseContext, _ session: WireSession, _ token: [UInt8], _ status: Status, _ what: String) throws(CaseStop) {
        try Expect.error(try sync(ctx, session, token), status, "SYNC with \(what)")
    }

    /// BAD_TOKEN within two seconds: a store may take up to a second to see a change
    /// another process made to its registry.
    static func refusedWithin(_ ctx: CaseContext, _ session: WireSession, _ token: [UInt8], _ what: String) throws(CaseStop) {
        let deadline = Clocks.monotonicMilliseconds() + 2_000
        var answer = try sync(ctx, session, token)
        while !isError(answer, .badToken) && Clocks.monotonicMilliseconds() < deadline {
            Pause.sleep(ms: 100)
            answer = try sync(ctx, session, token)
        }
        try Expect.error(answer, .badToken, "SYNC with \(what) (retried for 2 s)")
    }

    static func isError(_ message: Message, _ status: Status) -> Bool {
        if case .error(let error) = message { return error.status == status }
        return false
    }

    /// The fields of a valid token, written by the caller's choice of order and extras.
    static func claims(user: String, device: String, expiresAt: UInt64 = Clocks.wallMilliseconds() + 3_600_000) -> [[UInt8]] {
        [RawFrame.field(.user, string: user), RawFrame.field(.deviceID, string: device),
         RawFrame.field(.expiresAt, RawFrame.bigEndian(expiresAt)), RawFrame.field(.issuedAt, RawFrame.bigEndian(Clocks.wallMilliseconds()))]
    }

    static let all: [ConformanceCase] = [
        ConformanceCase("token.layout", clause: "7.2-1", "the MAC covers the format byte and the fields") { ctx throws(CaseStop) in
            let session = try ctx.storeDevice()
            let user = try ctx.user(), device = try ctx.readerDevice()
            try accepted(ctx, session, try ctx.token(user: user, device: device), "a token laid out as section 7.2 says")
            let fieldsOnly = try ctx.forge(macCoversFormat: false) { $0 += claims(user: user, device: device).joined() }
            try refused(ctx, session, fieldsOnly, .badToken, "a token whose MAC leaves out the format byte")
            return "01 || fields || MAC(01 || fields) accepted; MAC over the fields alone → BAD_TOKEN"
        },

        ConformanceCase("token.credential-fields", clause: "7.2-2", "credential fields keep their frame types and limits; 0x41 is a u64") { ctx throws(CaseStop) in
            let session = try ctx.storeDevice()
            let user = try ctx.user()
            let fields = claims(user: user, device: try ctx.readerDevice())
            let longUser = RawFrame.field(.user, [UInt8](repeating: 0x61, count: 65))
            try refused(ctx, session, try ctx.forge { $0 += longUser + fields[1] + fields[2] + fields[3] }, .badToken, "a 65-byte user")
            let badDevice = RawFrame.field(.deviceID, [0xC0, 0xAF])
            try refused(ctx, session, try ctx.forge { $0 += fields[0] + badDevice + fields[2] + fields[3] }, .badToken, "a device_id that is not UTF-8")
            let shortIssued = RawFrame.field(.issuedAt, [0, 0, 0, 1])
            try refused(ctx, session, try ctx.forge { $0 += fields[0] + fields[1] + fields[2] + shortIssued }, .badToken, "a 4-byte issued_at (0x41)")
            // The longest device id, enrolled so that its token can pass.
            let longest = ctx.unique("max") + String(repeating: "x", count: 64)
            let maxID = String(longest.utf8.prefix(64))!
            _ = try ctx.registry().enroll(maxID, user: user)
            try accepted(ctx, session, try ctx.token(user: user, device: maxID), "a token with a 64-byte device_id")
            let tooLong = RawFrame.field(.deviceID, Array((maxID + "x").utf8))
            try refused(ctx, session, try ctx.forge { $0 += fields[0] + tooLong + fields[2] + fields[3] }, .badToken, "a 65-byte device_id")
            return "64-byte device_id accepted; 65-byte user and device_id, non-UTF-8 device_id, 4-byte issued_at → BAD_TOKEN"
        },

        ConformanceCase("token.body-rules", clause: "7.2-3", "a verifier applies the body rules of sections 3.3 and 3.4") { ctx throws(CaseStop) in
            let session = try ctx.storeDevice()
            let user = try ctx.user(), device = try ctx.readerDevice()
            let fields = claims(user: user, device: device)
            try accepted(ctx, session, try ctx.forge { $0 += fields.joined() + RawFrame.field(0x7E, [1, 2]) }, "an extra unknown field")
            try accepted(ctx, session, try ctx.forge { $0 += fields.reversed().joined() }, "fields in descending order")
            try refused(ctx, session, try ctx.forge { $0 += fields.joined() + fields[0] }, .badToken, "user twice")
            try refused(ctx, session, try ctx.forge { $0 += fields[0] + fields[2] + fields[3] }, .badToken, "no device_id")
            let shortExpiry = RawFrame.field(.expiresAt, [0xFF, 0xFF, 0xFF, 0xFF])
            try refused(ctx, session, try ctx.forge { $0 += fields[0] + fields[1] + shortExpiry + fields[3] }, .badToken, "a 4-byte expires_at")
            return "unknown field and any order accepted; duplicate, missing and malformed fields → BAD_TOKEN"
        },

        ConformanceCase("token.verify", clause: "7.2-4", "short tokens, other format bytes and wrong MACs are refused, MAC first") { ctx throws(CaseStop) in
            let session = try ctx.storeDevice()
            let (user, device) = subject(ctx)
            try refused(ctx, session, [UInt8](repeating: 0x01, count: 32), .badToken, "a 32-byte token")
            try refused(ctx, session, [0x01] + [UInt8](repeating: 0, count: 32), .badToken, "a 33-byte token with a wrong MAC")
            try refused(ctx, session, try ctx.forge(format: 2) { $0 += claims(user: user, device: device).joined() }, .badToken, "format byte 02")
            var flipped = try ctx.token(user: user, device: device)
            flipped[flipped.count - 1] ^= 0x80
            try refused(ctx, session, flipped, .badToken, "one MAC bit flipped")
            // Expired and badly signed: the MAC is checked first, so BAD_TOKEN.
            var expired = try ctx.token(user: user, device: device, expiresInMs: -60_000)
            expired[expired.count - 1] ^= 0x80
            try refused(ctx, session, expired, .badToken, "an expired token with a wrong MAC")
            return "32 bytes, wrong MAC, format 02, flipped bit, expired with bad MAC → all BAD_TOKEN"
        },

        ConformanceCase("token.expiry", clause: "7.2-5", "a token is expired once the clock reaches expires_at") { ctx throws(CaseStop) in
            let session = try ctx.storeDevice()
            let token = try ctx.readerToken(expiresInMs: 2_000)
            try accepted(ctx, session, token, "a token with 2 s to live")
            Pause.sleep(ms: 2_200)
            try refused(ctx, session, token, .tokenExpired, "the same token 2.2 s later")
            return "valid before expires_at, TOKEN_EXPIRED after (assumes the clocks agree)"
        },

        ConformanceCase("token.expired-or-bad", clause: "7.3-2", "BAD_TOKEN for a token that fails verification, TOKEN_EXPIRED for a valid expired one") { ctx throws(CaseStop) in
            let session = try ctx.storeDevice()
            let user = try ctx.user(), device = try ctx.readerDevice()
            try refused(ctx, session, try ctx.token(user: user, device: device, expiresInMs: -60_000), .tokenExpired, "a token expired a minute ago")
            let token = try ctx.token(user: user, device: device)
            try refused(ctx, session, Array(token.dropLast(5)), .badToken, "a token cut short")
            let registration = try ctx.registration(device: device, user: user)
            try refused(ctx, session, registration, .badToken, "a registration in place of a token")
            try accepted(ctx, session, token, "the intact token")
            return "expired → TOKEN_EXPIRED; truncated or wrong key → BAD_TOKEN; intact → SYNC_OK"
        },

        ConformanceCase("token.revoked", clause: "7.3-3", "a token stops working once its device is revoked or enrolled again, and a token of no user never works") { ctx throws(CaseStop) in
            let session = try ctx.storeDevice()
            let user = try ctx.user()
            let registry = try ctx.registry()
            let device = try ctx.enrolledDevice().deviceID
            let first = try ctx.token(user: user, device: device)
            try accepted(ctx, session, first, "a token of a freshly enrolled device")
            Pause.sleep(ms: 2)
            _ = try registry.enroll(device, user: user)
            try refusedWithin(ctx, session, first, "a token issued before its device was enrolled again")
            let second = try ctx.token(user: user, device: device)
            try accepted(ctx, session, second, "a token issued after the new enrolment")
            try registry.revoke(device)
            try refusedWithin(ctx, session, second, "a token of a revoked device")
            try refused(ctx, session, try ctx.token(user: ctx.unique("nobody"), device: device), .badToken, "a token of a user the store does not have")
            return "re-enrolled → BAD_TOKEN, new token SYNC_OK; revoked → BAD_TOKEN; no such user → BAD_TOKEN"
        },
    ]
}
