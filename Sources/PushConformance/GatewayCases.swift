import PushClock
import PushSession
import PushWire

/// The gateway (sections 4.1, 4.13 to 4.15, 5.5, 7.4, 8-1): roles, routing, PUSH_ACK
/// counts, offline queues, redelivery, MISSED and REPLACED.
enum GatewayCases {
    static let all: [ConformanceCase] = roles + routing + queues + delivery + lifecycle + registry + userAndOnce

    static let roles: [ConformanceCase] = [
        ConformanceCase("gateway.device-push-forbidden", clause: "4.1-3", "PUSH from a device is FORBIDDEN") { ctx throws(CaseStop) in
            let id = ctx.unique("dev")
            let device = try ctx.gatewayDevice(id, user: ctx.unique("user"))
            try Expect.refused(device, .push(Push(target: .device(id), id: [1])), .forbidden, "PUSH from a device")
            return "FORBIDDEN"
        },

        ConformanceCase("gateway.not-served", clause: "4.1-4", "requests the gateway does not serve are BAD_REQUEST") { ctx throws(CaseStop) in
            let provider = try ctx.gatewayProvider()
            try Expect.refused(provider, .store(StoreRequest(user: ctx.unique("user"), payload: [1])), .badRequest, "STORE to the gateway")
            try Expect.refused(provider, .recall(Recall(id: PayloadID.random())), .badRequest, "RECALL to the gateway")
            let device = try ctx.gatewayDevice(ctx.unique("dev"), user: ctx.unique("user"))
            try Expect.refused(device, .login(Login(user: ctx.unique("user"), password: [1], deviceID: "d")), .badRequest, "LOGIN to the gateway")
            return "STORE, RECALL (provider) and LOGIN (device) → BAD_REQUEST"
        },

        ConformanceCase("gateway.role-before-service", clause: "4.1-5", "the role check comes before the service check at the gateway") { ctx throws(CaseStop) in
            // LOGIN, FETCH, SYNC and ACK are never a provider's and STORE, RECALL, STATUS
            // never a device's: FORBIDDEN, though the gateway serves none of them ([4.1-3]).
            let provider = try ctx.gatewayProvider()
            try Expect.refused(provider, .fetch(Fetch(id: PayloadID.random(), token: [1])), .forbidden, "FETCH from a provider to the gateway")
            try Expect.refused(provider, .login(Login(user: "u", password: [1], deviceID: "d")), .forbidden, "LOGIN from a provider to the gateway")
            // REGISTRY is a gateway's request to the store: from a provider, or a device, to
            // the gateway it fails both checks, and the role check answers.
            try Expect.refused(provider, .registry(RegistryRequest(cursor: 0)), .forbidden, "REGISTRY from a provider to the gateway")
            let device = try ctx.gatewayDevice(ctx.unique("dev"), user: ctx.unique("user"))
            try Expect.refused(device, .store(StoreRequest(user: "u", payload: [1])), .forbidden, "STORE from a device to the gateway")
            try Expect.refused(device, .status(StatusRequest(id: PayloadID.random())), .forbidden, "STATUS from a device to the gateway")
            try Expect.refused(device, .registry(RegistryRequest(cursor: 0)), .forbidden, "REGISTRY from a device to the gateway")
            return "provider FETCH, LOGIN, REGISTRY and device STORE, STATUS, REGISTRY → FORBIDDEN"
        },

        ConformanceCase("gateway.push-rejected-whole", clause: "3.4-7", "a PUSH that fails a body check is not acted on at all") { ctx throws(CaseStop) in
            let gateway = try GatewayFixture(ctx)
            let id = ctx.unique("dev")
            let device = try gateway.device(id)
            let body = RawFrame.field(.id, Array("whole".utf8)) + RawFrame.field(.targetKind, [1]) + RawFrame.field(.target, string: id)
                + RawFrame.field(.priority, [11])
            try Expect.refusedRaw(gateway.provider, RawFrame.frame(.push, correlation: 300, body: body), .badRequest, "PUSH with priority 11")
            try device.expectSilence(ms: ctx.quietMs, "a refused PUSH addressed to it")
            return "BAD_REQUEST; the addressed device received nothing"
        },

        ConformanceCase("gateway.no-payload", clause: "8-1", "a PUSH carrying a payload is refused and never reaches the device") { ctx throws(CaseStop) in
            let gateway = try GatewayFixture(ctx)
            let id = ctx.unique("dev")
            let device = try gateway.device(id)
            let body = RawFrame.field(.id, Array("secret".utf8)) + RawFrame.field(.payload, Array("the secret itself".utf8))
                + RawFrame.field(.targetKind, [1]) + RawFrame.field(.target, string: id)
            try Expect.refusedRaw(gateway.provider, RawFrame.frame(.push, correlation: 301, body: body), .badRequest, "PUSH with a payload field")
            try device.expectSilence(ms: ctx.quietMs, "a PUSH with a payload addressed to it")
            return "BAD_REQUEST; nothing reached the device"
        },
    ]

    /// A gateway that follows the store's registry ([7.4-4], [7.4-6]); a gateway that
    /// follows none admits any validly signed registration, and these SKIP.
    static let registry: [ConformanceCase] = [
        ConformanceCase("gateway.refuses-gateway-role", clause: "4.2-5", "a HELLO with role 3 (gateway) is BAD_REQUEST at the gateway") { ctx throws(CaseStop) in
            try Expect.helloRefused(try ctx.connectGateway(), CaseContext.hello(.gateway, credential: [UInt8](repeating: 0, count: 56)),
                                    .badRequest, "HELLO role 3 to the gateway")
            return "ERROR BAD_REQUEST, closed"
        },

        ConformanceCase("gateway.registry-unenrolled", clause: "7.4-4", "a gateway that follows a registry refuses a valid registration the registry does not hold") { ctx throws(CaseStop) in
            guard try ctx.gatewayFollowsRegistry() else {
                throw .skip("the gateway follows no registry: it admitted a validly signed registration no registry holds (HELLO_OK)")
            }
            return "a validly signed registration the registry does not hold → BAD_CREDENTIALS"
        },

        ConformanceCase("gateway.registration-revoked", clause: "7.4-6", "a revoked registration's connection gets GOAWAY REVOKED, and its HELLO is refused") { ctx throws(CaseStop) in
            guard try ctx.gatewayFollowsRegistry() else {
                throw .skip("the gateway follows no registry: it admitted a validly signed registration no registry holds (HELLO_OK)")
            }
            let registry = try ctx.registry()
            let record = try ctx.enrolledDevice()
            let hello = CaseContext.hello(.device, credential: record.credential)
            // The gateway learns of the enrolment through its store, within a second or so.
            let deadline = Clocks.monotonicMilliseconds() + 5_000
            var session = try ctx.connectGateway()
            var answer = try session.hello(hello)
            while !isHelloOK(answer), Clocks.monotonicMilliseconds() < deadline {
                Pause.sleep(ms: 250)
                session = try ctx.connectGateway()
                answer = try session.hello(hello)
            }
            guard isHelloOK(answer) else { throw .fail("the gateway did not admit the enrolled registration within 5 s: \(describe(answer))") }
            let revokedAt = Clocks.monotonicMilliseconds()
            try registry.revoke(record.deviceID)
            let (header, message) = try session.next(timeoutMs: 7_000, waitingFor: "GOAWAY REVOKED within 5 s of the revocation")
            guard case .goaway(let goaway) = message, goaway.status == .revoked, header.correlation == 0 else {
                throw .fail("after the revocation the device got \(describe(message)), expected GOAWAY REVOKED")
            }
            let took = Clocks.monotonicMilliseconds() - revokedAt
            try Expect.that(took <= 5_000 + ctx.options.timerSlackMs, "GOAWAY REVOKED came \(took) ms after the revocation")
            _ = try session.expectClosed("GOAWAY REVOKED")
            try Expect.helloRefused(try ctx.connectGateway(), hello, .badCredentials, "the revoked registration's HELLO")
            return "GOAWAY REVOKED \(took) ms after the revocation, closed; HELLO with it again → BAD_CREDENTIALS"
        },
    ]

    static func isHelloOK(_ message: Message) -> Bool {
        if case .helloOK = message { return true }
        return false
    }

    static let lifecycle: [ConformanceCase] = [
        ConformanceCase("gateway.replaced", clause: "5.5-3", "a newer connection for a device id replaces the older with GOAWAY REPLACED") { ctx throws(CaseStop) in
            let id = ctx.unique("dev"), user = ctx.unique("user")
            let older = try ctx.gatewayDevice(id, user: user)
            let newer = try ctx.gatewayDevice(id, user: user)
            try Expect.goawayThenClose(older, .replaced, "a second connection for the device")
            try newer.expectAlive("replacing the older connection")
            return "older: GOAWAY REPLACED, closed; newer: open"
        },
    ]
}
