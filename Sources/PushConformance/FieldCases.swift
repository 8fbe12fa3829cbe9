import PushWire

/// Body fields a receiver must accept (section 3): varints, padding, order, unknown and
/// foreign tags. The refusals are the malformed vectors' job.
enum FieldCases {
    /// Sends a raw HELLO body and requires HELLO_OK, then PONG.
    static func helloAccepted(_ ctx: CaseContext, body: [UInt8], _ what: String) throws(CaseStop) {
        let session = try ctx.connectStore()
        try session.sendRaw(RawFrame.frame(.hello, correlation: 1, body: body), what)
        let (_, answer) = try session.next(waitingFor: "HELLO_OK to \(what)")
        guard case .helloOK = answer else { throw .fail("\(what) was answered \(describe(answer)), expected HELLO_OK") }
        try session.expectAlive(what)
    }

    /// Sends a raw PING body after the handshake and requires PONG.
    static func pingAccepted(_ ctx: CaseContext, body: [UInt8], _ what: String) throws(CaseStop) {
        let session = try ctx.storeDevice()
        try session.sendRaw(RawFrame.frame(.ping, correlation: 4242, body: body), what)
        let (header, answer) = try session.next(waitingFor: "PONG to \(what)")
        try Expect.that(answer == .pong && header.correlation == 4242, "\(what) was answered \(describe(answer)), expected PONG")
    }

    static let all: [ConformanceCase] = [
        ConformanceCase("fields.empty-values", clause: "3.1-1", "a body of fields with empty values fills it exactly") { ctx throws(CaseStop) in
            try pingAccepted(ctx, body: RawFrame.field(0x7E, []) + RawFrame.field(0x7F, []), "a PING with two empty unknown fields")
            return "PING with fields 7e and 7f of length 0 → PONG"
        },

        ConformanceCase("fields.varint-multibyte", clause: "3.1-2", "two-byte LEB128 lengths") { ctx throws(CaseStop) in
            try pingAccepted(ctx, body: RawFrame.field(0x7E, [UInt8](repeating: 7, count: 300)), "a PING with a 300-byte field (length ac 02)")
            try helloAccepted(ctx, body: RawFrame.helloBody(extra: RawFrame.field(.credential, [UInt8](repeating: 9, count: 200))),
                              "a device HELLO with a 200-byte credential (length c8 01)")
            return "lengths ac 02 and c8 01 decoded"
        },

        ConformanceCase("fields.varint-padded", clause: "3.1-4", "padded varints of 2, 3 and 4 bytes are accepted") { ctx throws(CaseStop) in
            let body = RawFrame.field(.role, [1], lengthBytes: 2) + RawFrame.field(.versionMin, [1], lengthBytes: 3)
                + RawFrame.field(.versionMax, [1], lengthBytes: 4)
            try helloAccepted(ctx, body: body, "a HELLO whose lengths are 81 00, 81 80 00 and 81 80 80 00")
            return "HELLO with padded lengths → HELLO_OK"
        },

        ConformanceCase("fields.credential-tags", clause: "3.2-2", "tags 0x40 and 0x41 are unknown in frames") { ctx throws(CaseStop) in
            let session = try ctx.storeDevice()
            // A one-byte 0x41 would be a malformed u64 if the receiver took it for issued_at.
            let body = RawFrame.field(0x40, Array("news".utf8)) + RawFrame.field(0x41, [0])
            try Expect.refusedRaw(session, RawFrame.frame(.sync, correlation: 9, body: body), .authRequired, "SYNC carrying only tags 0x40 and 0x41")
            return "SYNC with 0x40 and a 1-byte 0x41 → AUTH_REQUIRED (skipped, not BAD_REQUEST)"
        },

        ConformanceCase("fields.any-order", clause: "3.4-1", "receivers accept fields in any order") { ctx throws(CaseStop) in
            let body = RawFrame.field(.maxInflight, RawFrame.bigEndian(UInt32(8))) + RawFrame.field(.versionMax, [1])
                + RawFrame.field(.versionMin, [1]) + RawFrame.field(.role, [1])
            try helloAccepted(ctx, body: body, "a HELLO with its fields in descending tag order")
            return "HELLO fields 07, 03, 02, 01 → HELLO_OK"
        },

        ConformanceCase("fields.unknown-skipped", clause: "3.4-2", "unknown tags are skipped, however often they appear") { ctx throws(CaseStop) in
            let unknown = RawFrame.field(0x7E, Array("future".utf8)) + RawFrame.field(0x50, [1]) + RawFrame.field(0x50, [2, 3])
            try helloAccepted(ctx, body: RawFrame.helloBody(extra: unknown), "a HELLO with unknown tags 7e and 50 twice")
            try pingAccepted(ctx, body: unknown, "a PING with unknown tags")
            return "HELLO and PING with unknown tags → HELLO_OK, PONG"
        },

        ConformanceCase("fields.foreign-skipped", clause: "3.4-3", "known tags outside the message's table are skipped unchecked") { ctx throws(CaseStop) in
            // user with invalid UTF-8, a 2-byte priority and a repeated id: each would be
            // refused inside a table that holds them, none is in HELLO's.
            let foreign = RawFrame.field(.user, [0xFF, 0xFE]) + RawFrame.field(.priority, [0, 0x63])
                + RawFrame.field(.id, [1]) + RawFrame.field(.id, [2])
            try helloAccepted(ctx, body: RawFrame.helloBody(extra: foreign), "a HELLO with a bad user, a 2-byte priority and id twice")
            return "HELLO with foreign fields → HELLO_OK"
        },
    ]
}
