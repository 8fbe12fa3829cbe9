import PushClock
import PushSecurity
import PushSession
import PushWire

/// The credentials of HELLO (sections 4.2, 7.1, 7.4): who must send one, what a bad one
/// gets, and the keys they are made with.
enum CredentialCases {
    static let all: [ConformanceCase] = [
        ConformanceCase("hello.store-provider-needs-credential", clause: "4.2-2", "a provider HELLO without credential is BAD_REQUEST at the store") { ctx throws(CaseStop) in
            try Expect.helloRefused(try ctx.connectStore(), CaseContext.hello(.provider), .badRequest, "provider HELLO without credential")
            return "ERROR BAD_REQUEST, closed"
        },

        ConformanceCase("hello.gateway-needs-credential", clause: "4.2-2", "device and provider HELLOs without credential are BAD_REQUEST at the gateway") { ctx throws(CaseStop) in
            try Expect.helloRefused(try ctx.connectGateway(), CaseContext.hello(.device), .badRequest, "device HELLO without registration")
            try Expect.helloRefused(try ctx.connectGateway(), CaseContext.hello(.provider), .badRequest, "provider HELLO without credential")
            return "both ERROR BAD_REQUEST, closed"
        },

        ConformanceCase("hello.store-ignores-device-credential", clause: "4.2-3", "the store ignores a credential in a device HELLO") { ctx throws(CaseStop) in
            let session = try ctx.connectStore()
            _ = try session.open(CaseContext.hello(.device, credential: [UInt8](repeating: 0x5A, count: 50)))
            try session.expectAlive("HELLO_OK")
            return "device HELLO with 50 bytes of junk credential → HELLO_OK"
        },

        ConformanceCase("hello.store-bad-provider-credential", clause: "4.2-4", "a provider credential that fails verification is BAD_CREDENTIALS at the store") { ctx throws(CaseStop) in
            try Expect.helloRefused(try ctx.connectStore(), CaseContext.hello(.provider, credential: [UInt8](repeating: 0, count: 40)),
                                    .badCredentials, "provider credential of 40 zero bytes")
            return "ERROR BAD_CREDENTIALS, closed"
        },

        ConformanceCase("hello.gateway-bad-credentials", clause: "4.2-4", "a bad registration or provider credential is BAD_CREDENTIALS at the gateway") { ctx throws(CaseStop) in
            let junk = [UInt8](repeating: 0x01, count: 60)
            try Expect.helloRefused(try ctx.connectGateway(), CaseContext.hello(.device, credential: junk), .badCredentials, "a junk registration")
            try Expect.helloRefused(try ctx.connectGateway(), CaseContext.hello(.provider, credential: [UInt8](repeating: 0, count: 40)),
                                    .badCredentials, "a provider credential of 40 zero bytes")
            return "registration and provider credential both ERROR BAD_CREDENTIALS, closed"
        },

        ConformanceCase("hello.provider-credential", clause: "7.1-1", "a provider credential built as section 7.1 says is accepted") { ctx throws(CaseStop) in
            var accepted: [String] = []
            if ctx.options.store != nil {
                _ = try ctx.storeProvider()
                accepted.append("store")
            }
            if ctx.options.gateway != nil {
                _ = try ctx.gatewayProvider()
                accepted.append("gateway")
            }
            guard !accepted.isEmpty else { throw .skip("needs --store or --gateway") }
            return "HELLO_OK from the " + accepted.joined(separator: " and the ")
        },

        ConformanceCase("hello.provider-credential-window", clause: "7.1-3", "a provider credential is valid within 300 s of the server's clock") { ctx throws(CaseStop) in
            let service = ctx.options.store != nil ? "store" : "gateway"
            func attempt(_ offsetMs: Int64) throws(CaseStop) -> Message {
                let credential = try ctx.providerCredential(for: service == "store" ? .store : .gateway, offsetMs: offsetMs)
                let session: WireSession
                if service == "store" { session = try ctx.connectStore() } else { session = try ctx.connectGateway() }
                return try session.hello(CaseContext.hello(.provider, credential: credential))
            }
            for offset: Int64 in [-400_000, 400_000] {
                try Expect.error(try attempt(offset), .badCredentials, "provider credential \(offset / 1000) s from now")
            }
            for offset: Int64 in [-200_000, 200_000] {
                let answer = try attempt(offset)
                guard case .helloOK = answer else { throw .fail("provider credential \(offset / 1000) s from now was answered \(describe(answer))") }
            }
            return "\(service): ±400 s → BAD_CREDENTIALS, ±200 s → HELLO_OK (assumes the clocks agree)"
        },

        ConformanceCase("hello.credential-audience", clause: "7.1-4", "a provider credential made for the other server is BAD_CREDENTIALS") { ctx throws(CaseStop) in
            var checked: [String] = []
            if ctx.options.store != nil {
                try Expect.helloRefused(try ctx.connectStore(), CaseContext.hello(.provider, credential: try ctx.providerCredential(for: .gateway)),
                                        .badCredentials, "a provider credential made for the gateway, at the store")
                checked.append("the gateway's at the store")
            }
            if ctx.options.gateway != nil {
                try Expect.helloRefused(try ctx.connectGateway(), CaseContext.hello(.provider, credential: try ctx.providerCredential(for: .store)),
                                        .badCredentials, "a provider credential made for the store, at the gateway")
                checked.append("the store's at the gateway")
            }
            guard !checked.isEmpty else { throw .skip("needs --store or --gateway") }
            return checked.joined(separator: " and ") + " → BAD_CREDENTIALS"
        },

        ConformanceCase("hello.credential-replay", clause: "7.1-5", "a provider credential accepted once is BAD_CREDENTIALS the second time") { ctx throws(CaseStop) in
            var checked: [String] = []
            for (name, audience) in [("store", CredentialAudience.store), ("gateway", .gateway)] {
                let connect = { () throws(CaseStop) -> WireSession in name == "store" ? try ctx.connectStore() : try ctx.connectGateway() }
                guard name == "store" ? ctx.options.store != nil : ctx.options.gateway != nil else { continue }
                let credential = try ctx.providerCredential(for: audience)
                _ = try connect().open(CaseContext.hello(.provider, credential: credential))
                try Expect.helloRefused(try connect(), CaseContext.hello(.provider, credential: credential), .badCredentials,
                                        "the same provider credential again at the \(name)")
                checked.append(name)
            }
            guard !checked.isEmpty else { throw .skip("needs --store or --gateway") }
            return "HELLO_OK once, then BAD_CREDENTIALS for the replay, at the " + checked.joined(separator: " and the ")
        },

        ConformanceCase("hello.registration", clause: "7.4-1", "a registration credential built as section 7.4 says is accepted") { ctx throws(CaseStop) in
            let device = ctx.unique("dev")
            let session = try ctx.gatewayDevice(device, user: ctx.unique("user"), tags: ["news"])
            try session.expectAlive("HELLO_OK")
            return "device \(device) → HELLO_OK"
        },

        ConformanceCase("hello.registration-refused", clause: "7.4-4", "an expired or altered registration is BAD_CREDENTIALS") { ctx throws(CaseStop) in
            let device = ctx.unique("dev"), user = ctx.unique("user")
            let expired = try ctx.registration(device: device, user: user, expiresInMs: -1_000)
            try Expect.helloRefused(try ctx.connectGateway(), CaseContext.hello(.device, credential: expired), .badCredentials, "a registration that expired 1 s ago")
            var altered = try ctx.registration(device: device, user: user)
            altered[altered.count - 1] ^= 0x01
            try Expect.helloRefused(try ctx.connectGateway(), CaseContext.hello(.device, credential: altered), .badCredentials, "a registration with one MAC bit flipped")
            return "expired → BAD_CREDENTIALS; altered MAC → BAD_CREDENTIALS"
        },

        ConformanceCase("hello.key-derivation", clause: "7.4-5", "fetch tokens and registrations use distinct keys derived from the server key") { ctx throws(CaseStop) in
            let user = ctx.unique("user"), device = ctx.unique("dev")
            var checked: [String] = []
            if ctx.options.gateway != nil {
                // A fetch token's layout differs from a registration only by its key.
                let asRegistration = try ctx.forge(purpose: CredentialSigner.fetchTokenPurpose) { fields in
                    fields += RawFrame.field(.user, string: user) + RawFrame.field(.deviceID, string: device)
                    fields += RawFrame.field(.expiresAt, RawFrame.bigEndian(Clocks.wallMilliseconds() + 3_600_000))
                    fields += RawFrame.field(.issuedAt, RawFrame.bigEndian(Clocks.wallMilliseconds()))
                }
                try Expect.helloRefused(try ctx.connectGateway(), CaseContext.hello(.device, credential: asRegistration), .badCredentials,
                                        "a registration signed with the fetch-token key")
                _ = try ctx.gatewayDevice(device, user: user)
                checked.append("gateway: registration key accepted, fetch-token key refused")
            }
            if ctx.options.store != nil {
                let session = try ctx.storeDevice()
                let asToken = try ctx.registration(device: device, user: user)
                try Expect.refused(session, .sync(Sync(token: asToken)), .badToken, "SYNC with a registration as token")
                let answer = try session.request(.sync(Sync(token: try ctx.readerToken())))
                guard case .syncOK = answer else { throw .fail("SYNC with a token under the fetch-token key was answered \(describe(answer))") }
                checked.append("store: fetch-token key accepted, registration key refused")
            }
            guard !checked.isEmpty else { throw .skip("needs --store or --gateway") }
            return checked.joined(separator: "; ")
        },
    ]
}
