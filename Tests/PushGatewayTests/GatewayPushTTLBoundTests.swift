import Testing
import PushSecurity
import PushWire
@testable import PushGateway

/// [4.13-5] "keeps a queued push for at most ttl_s seconds": the gateway may keep it for
/// less, and keeps none longer than `gateway.max_push_ttl_s`.
@Suite("Gateway: the longest push TTL")
struct GatewayPushTTLBoundTests {
    static func logic(maxTTL: UInt32) -> GatewayLogic {
        var settings = GatewaySettings()
        settings.maxPushTTLSeconds = maxTTL
        return GatewayLogic(settings: settings, serverKey: SecretKey(bytes: Array(repeating: 3, count: 32))!, metrics: GatewayMetrics(),
                            wallClock: { 1_700_000_000_000 }, monotonicClock: { 1_000_000 })
    }

    @Test("a PUSH asking longer than the bound is kept for the bound; a shorter one for its own ttl_s; ttl_s 0 stays connected-only")
    func bound() {
        let logic = Self.logic(maxTTL: 60)
        #expect(logic.queuedPush(Push(target: .device("d"), id: [1], ttlSeconds: 86_400)).expiresAtMs == 1_000_000 + 60_000)
        #expect(logic.queuedPush(Push(target: .device("d"), id: [2], ttlSeconds: 30)).expiresAtMs == 1_000_000 + 30_000)
        #expect(logic.queuedPush(Push(target: .device("d"), id: [3], ttlSeconds: 0)).connectedOnly)
    }
}
