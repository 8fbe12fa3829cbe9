import Testing
import PushSession
import PushWire

@Suite("HELLO negotiation")
struct HelloNegotiationTests {
    let limits: ServiceLimits = {
        var limits = ServiceLimits(name: "test", served: [])
        limits.maxFrame = 1 << 20
        limits.maxInflight = 64
        limits.keepaliveMs = 5_000
        return limits
    }()

    func verdict(_ hello: Hello, full: Bool = false) -> HelloVerdict {
        HelloNegotiation.negotiate(hello, limits: limits, overConnectionLimit: full)
    }

    @Test("[5.2-1] a version range without 1 is GOAWAY UNSUPPORTED_VERSION")
    func versions() {
        #expect(verdict(Hello(role: .device, versionMin: 2, versionMax: 3)) == .fatal(.unsupportedVersion, "this server speaks protocol version 1 only"))
        guard case .accept(let ok) = verdict(Hello(role: .device, versionMin: 0, versionMax: 7)) else { Issue.record("refused"); return }
        #expect(ok.version == 1)
    }

    @Test("[5.2-3] [5.2-4] max_frame is the smaller proposal, at least 1024 and at most 16 MiB")
    func maxFrame() {
        guard case .accept(let absent) = verdict(Hello(role: .device)),
              case .accept(let small) = verdict(Hello(role: .device, maxFrame: 2048)),
              case .accept(let huge) = verdict(Hello(role: .device, maxFrame: .max)) else { Issue.record("refused"); return }
        #expect(absent.maxFrame == 65_536)
        #expect(small.maxFrame == 2048)
        #expect(huge.maxFrame == 1 << 20)
        guard case .refuse(.badRequest, _) = verdict(Hello(role: .device, maxFrame: 1023)) else { Issue.record("accepted"); return }
    }

    @Test("[5.2-6] max_inflight is at least 1 and at most the server's; 0 is BAD_REQUEST; [5.2-5] the server picks keepalive")
    func inflightAndKeepalive() {
        guard case .accept(let asked) = verdict(Hello(role: .device, keepaliveMs: 1, maxInflight: 8)),
              case .accept(let greedy) = verdict(Hello(role: .device, maxInflight: 10_000)) else { Issue.record("refused"); return }
        #expect(asked.maxInflight == 8 && greedy.maxInflight == 64)
        #expect(asked.keepaliveMs == 5_000)
        guard case .refuse(.badRequest, _) = verdict(Hello(role: .device, maxInflight: 0)) else { Issue.record("accepted"); return }
    }

    @Test("[5.1-3] a server at its connection limit answers BUSY")
    func busy() {
        guard case .refuse(.busy, _) = verdict(Hello(role: .device), full: true) else { Issue.record("accepted"); return }
    }
}
