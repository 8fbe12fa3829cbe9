import PushSecurity
import PushWire
import PushSession

/// How the store verifies fetch tokens (section 7.2, 7.3), judged through SYNC: the
/// cheapest request that checks a token and nothing else.
enum TokenCases {
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

    /// The fields of a valid token, written by the caller's choice of order and extras.
    static func claims(user: String, device: String, expiresAt: UInt64 = Clocks.wallMilliseconds() + 3_600_000) -> [[UInt8]] {
        [RawFrame.field(.user, string: user), RawFrame.field(.deviceID, string: device),
         RawFrame.field(.expiresAt, RawFrame.bigEndian(expiresAt)), RawFrame.field(.issuedAt, RawFrame.bigEndian(Clocks.wallMilliseconds()))]
    }

    static let all: [ConformanceCase] = [
        ConformanceCase("token.layout", clause: "7.2-1", "the MAC covers the format byte and the fields") { ctx throws(CaseStop) in
            let session = try ctx.storeDevice()
            let user = ctx.unique("user"), device = ctx.unique("dev")
            try accepted(ctx, session, try ctx.token(user: user, device: device), "a token laid out as section 7.2 says")
            let fieldsOnly = try ctx.forge(macCoversFormat: false) { $0 += claims(user: user, device: device).joined() }
            try refused(ctx, session, fieldsOnly, .badToken, "a token whose MAC leaves out the format byte")
            return "01 || fields || MAC(01 || fields) accepted; MAC over the fields alone → BAD_TOKEN"
        },

        ConformanceCase("token.credential-fields", clause: "7.2-2", "credential fields keep their frame types and limits; 0x41 is a u64") { ctx throws(CaseStop) in
            let session = try ctx.storeDevice()
            let device = ctx.unique("dev")
            let fields = claims(user: ctx.unique("user"), device: device)
            let longUser = RawFrame.field(.user, [UInt8](repeating: 0x61, count: 65))
            try refused(ctx, session, try ctx.forge { $0 += longUser + fields[1] + fields[2] + fields[3] }, .badToken, "a 65-byte user")
            let badDevice = RawFrame.field(.deviceID, [0xC0, 0xAF])
            try refused(ctx, session, try ctx.forge { $0 += fields[0] + badDevice + fields[2] + fields[3] }, .badToken, "a device_id that is not UTF-8")
            let shortIssued = RawFrame.field(.issuedAt, [0, 0, 0, 1])
            try refused(ctx, session, try ctx.forge { $0 += fields[0] + fields[1] + fields[2] + shortIssued }, .badToken, "a 4-byte issued_at (0x41)")
            let maxUser = RawFrame.field(.user, [UInt8](repeating: 0x61, count: 64))
            try accepted(ctx, session, try ctx.forge { $0 += maxUser + fields[1] + fields[2] + fields[3] }, "a 64-byte user")
            return "64-byte user accepted; 65-byte user, non-UTF-8 device_id, 4-byte issued_at → BAD_TOKEN"
        },

        ConformanceCase("token.body-rules", clause: "7.2-3", "a verifier applies the body rules of sections 3.3 and 3.4") { ctx throws(CaseStop) in
            let session = try ctx.storeDevice()
            let user = ctx.unique("user"), device = ctx.unique("dev")
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
            let user = ctx.unique("user"), device = ctx.unique("dev")
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
            let token = try ctx.token(user: ctx.unique("user"), device: ctx.unique("dev"), expiresInMs: 2_000)
            try accepted(ctx, session, token, "a token with 2 s to live")
            Pause.sleep(ms: 2_200)
            try refused(ctx, session, token, .tokenExpired, "the same token 2.2 s later")
            return "valid before expires_at, TOKEN_EXPIRED after (assumes the clocks agree)"
        },

        ConformanceCase("token.expired-or-bad", clause: "7.3-2", "BAD_TOKEN for a token that fails verification, TOKEN_EXPIRED for a valid expired one") { ctx throws(CaseStop) in
            let session = try ctx.storeDevice()
            let user = ctx.unique("user"), device = ctx.unique("dev")
            try refused(ctx, session, try ctx.token(user: user, device: device, expiresInMs: -60_000), .tokenExpired, "a token expired a minute ago")
            let token = try ctx.token(user: user, device: device)
            try refused(ctx, session, Array(token.dropLast(5)), .badToken, "a token cut short")
            let registration = try ctx.registration(device: device, user: user)
            try refused(ctx, session, registration, .badToken, "a registration in place of a token")
            try accepted(ctx, session, token, "the intact token")
            return "expired → TOKEN_EXPIRED; truncated or wrong key → BAD_TOKEN; intact → SYNC_OK"
        },
    ]
}
