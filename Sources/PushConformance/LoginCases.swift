import PushClock
import PushSecurity
import PushSession
import PushWire

/// LOGIN (section 4.6) and the fetch token it issues (section 7.3).
extension StoreCases {
    static let logins: [ConformanceCase] = [
        ConformanceCase("store.login", clause: "4.6-1", "LOGIN trades user and password for a fetch token") { ctx throws(CaseStop) in
            let device = try ctx.readerDevice()
            let (ok, session) = try logIn(ctx, device: device)
            try Expect.that(!ok.token.isEmpty, "LOGIN_OK carried an empty token")
            try Expect.that(ok.expiresAt > Clocks.wallMilliseconds(), "LOGIN_OK expires_at \(ok.expiresAt) is not in the future")
            let answer = try session.request(.sync(Sync(token: ok.token)))
            guard case .syncOK = answer else { throw .fail("SYNC with the new token was answered \(describe(answer))") }
            return "LOGIN_OK token of \(ok.token.count) bytes, valid for \((ok.expiresAt - Clocks.wallMilliseconds()) / 1000) s; SYNC accepts it"
        },

        ConformanceCase("store.login-token", clause: "7.3-1", "the token from LOGIN_OK is a signed credential for that user and device") { ctx throws(CaseStop) in
            let keys = try ctx.keys()
            let user = try ctx.user()
            let device = try ctx.readerDevice()
            let (ok, _) = try logIn(ctx, device: device)
            let signer = CredentialSigner(serverKey: keys.serverKey, purpose: CredentialSigner.fetchTokenPurpose)
            let claims: FetchToken
            do {
                claims = try FetchToken.open(ok.token, signer: signer, nowMs: Clocks.wallMilliseconds())
            } catch {
                throw .fail("the LOGIN_OK token does not verify under the fetch-token key: \(error)")
            }
            try Expect.equal(claims.user, user, "token user")
            try Expect.equal(claims.deviceID, device, "token device_id")
            try Expect.equal(claims.expiresAt, ok.expiresAt, "token expires_at against LOGIN_OK's")
            try Expect.that(claims.issuedAt <= Clocks.wallMilliseconds() + 5_000, "token issued_at \(claims.issuedAt) is in the future")
            return "token verifies; user, device_id, expires_at and issued_at as expected"
        },

        ConformanceCase("store.login-failures-alike", clause: "4.6-2", "an unknown user and a wrong password get the same BAD_CREDENTIALS") { ctx throws(CaseStop) in
            let user = try ctx.user()
            let session = try ctx.storeDevice()
            let unknown = try session.request(.login(Login(user: ctx.unique("nobody"), password: Array("x".utf8), deviceID: "d")))
            let wrong = try session.request(.login(Login(user: user, password: Array("wrong \(ctx.unique("pw"))".utf8), deviceID: "d")))
            for answer in [unknown, wrong] {
                if case .error(let error) = answer, error.status == .rateLimited {
                    throw .skip("LOGIN was RATE_LIMITED by earlier failures; try again after the store's window")
                }
            }
            try Expect.error(unknown, .badCredentials, "LOGIN for an unknown user")
            try Expect.error(wrong, .badCredentials, "LOGIN with a wrong password")
            try Expect.that(unknown == wrong, "the two refusals differ: \(describe(unknown)) vs \(describe(wrong))")
            return "both ERROR BAD_CREDENTIALS with identical bodies"
        },

        ConformanceCase("store.login-unenrolled", clause: "4.6-4", "the right password with a device id not enrolled for the user is BAD_CREDENTIALS, as a wrong password") { ctx throws(CaseStop) in
            let password = try ctx.password()
            let user = try ctx.user()
            let session = try ctx.storeDevice()
            let device = ctx.unique("never-enrolled")
            let unenrolled = try session.request(.login(Login(user: user, password: password, deviceID: device)))
            let wrong = try session.request(.login(Login(user: user, password: Array("wrong \(ctx.unique("pw"))".utf8), deviceID: device)))
            for answer in [unenrolled, wrong] {
                if case .error(let error) = answer, error.status == .rateLimited {
                    throw .skip("LOGIN was RATE_LIMITED by earlier failures; try again after the store's window")
                }
            }
            try Expect.error(unenrolled, .badCredentials, "LOGIN with the right password for device \(device), never enrolled")
            try Expect.that(unenrolled == wrong, "the refusal differs from a wrong password's: \(describe(unenrolled)) vs \(describe(wrong))")
            return "ERROR BAD_CREDENTIALS, identical to a wrong password's"
        },
    ]

    /// Run last (see `ConformanceSuite.catalogue`).
    static let rateLimit: [ConformanceCase] = [
        ConformanceCase("store.login-rate-limit", clause: "4.6-3", "failed logins past the store's limit get RATE_LIMITED") { ctx throws(CaseStop) in
            let session = try ctx.storeDevice()
            let user = ctx.unique("guess")
            // A fresh user name, so only this case's failures count against it.
            for attempt in 1...10 {
                let answer = try session.request(.login(Login(user: user, password: Array("guess \(attempt)".utf8), deviceID: "d")))
                if case .error(let error) = answer, error.status == .rateLimited {
                    guard attempt > 1 else { throw .skip("the first LOGIN was already RATE_LIMITED: this host is over the store's per-address limit") }
                    return "RATE_LIMITED after \(attempt - 1) failed logins for one user"
                }
                try Expect.error(answer, .badCredentials, "failed LOGIN \(attempt)")
            }
            throw .skip("no RATE_LIMITED within 10 failed logins; the store's limit may be higher")
        },
    ]
}
