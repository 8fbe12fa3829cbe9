import PushWire

/// Output and back-pressure (section 5.7): a peer that stays within max_inflight is
/// slowed down, never cut, however many replies it leaves unread.
enum FlowCases {
    /// Payload bytes the case aims for; halved while the store answers TOO_LARGE.
    static let payloadBytes = 4_000
    /// Replies held unread: more than the kernel's socket buffers and any sensible output
    /// cap together, so the server's own cap is certainly passed.
    static let unreadBytes = 12 * 1024 * 1024

    static let all: [ConformanceCase] = [
        ConformanceCase("flow.unread-replies", clause: "5.7-1", "a client that leaves megabytes of replies unread within max_inflight is not cut") { ctx throws(CaseStop) in
            let fixture = try StoreFixture(ctx)
            var size = payloadBytes
            var stored: StoreOK?
            while stored == nil {
                let answer = try fixture.provider.request(.store(StoreRequest(user: fixture.user, payload: [UInt8](repeating: 0x5A, count: size), ttlSeconds: 600)))
                switch answer {
                case .storeOK(let ok):
                    ctx.noteStored(ok.id)
                    stored = ok
                case .error(let error) where error.status == .tooLarge && size > 256:
                    size /= 2
                default:
                    throw .fail("STORE of \(size) bytes was answered \(describe(answer))")
                }
            }
            guard let id = stored?.id else { throw .fail("internal: no payload") }
            let device = try ctx.storeDevice(maxInflight: UInt32(unreadBytes / size + 1))
            let count = min(Int(device.negotiatedInflight), unreadBytes / size + 1)
            guard count * size >= 4 * 1024 * 1024 else {
                throw .skip("max_inflight \(device.negotiatedInflight) of \(size)-byte payloads cannot outgrow the socket buffers; not judged")
            }
            var bytes: [UInt8] = []
            var ids: [UInt32] = []
            for _ in 0..<count {
                let correlation = device.takeCorrelation()
                ids.append(correlation)
                Message.fetch(Fetch(id: id, token: fixture.token)).encode(correlation: correlation, into: &bytes)
            }
            try device.sendRaw(bytes, "\(count) FETCHes")
            // Time for the replies to fill every buffer on the way while none is read.
            Pause.sleep(ms: 1_000)
            let answers = try device.answers(to: ids, "\(count) FETCHes whose replies were left unread")
            let failed = answers.values.filter { if case .fetchOK = $0 { false } else { true } }
            try Expect.that(failed.isEmpty, "\(failed.count) FETCHes failed, first \(failed.first.map(describe) ?? "")")
            return "\(count) FETCH_OKs of \(size) bytes (\(count * size / 1_048_576) MiB) left unread for 1 s, then all read; never cut"
        },
    ]
}
