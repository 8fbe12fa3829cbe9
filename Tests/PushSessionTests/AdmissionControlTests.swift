import Testing
import PushSession

/// The connection counts by stage, with no sockets: pending caps, admitted slots, refusals
/// and their rate-limited log lines.
@Suite("AdmissionControl")
struct AdmissionControlTests {
    static func control(pending: Int = 4, perAddress: Int = 2, admitted: Int = 3) -> AdmissionControl<Int> {
        var limits = ServiceLimits(name: "test", served: [])
        limits.maxPendingHandshakes = pending
        limits.maxPendingPerAddress = perAddress
        limits.maxConnections = admitted
        return AdmissionControl(limits: limits)
    }

    @Test("the server defaults: 5 s to HELLO_OK, 10 s per frame, 1,024 pending, 64 per address, 1 KiB frames before HELLO_OK")
    func defaults() {
        let limits = ServiceLimits(name: "test", served: [])
        #expect(limits.timeouts == SessionTimeouts(handshakeMs: 5_000, frameMs: 10_000))
        #expect(limits.maxPendingHandshakes == 1_024)
        #expect(limits.maxPendingPerAddress == 64)
        #expect(ServiceLimits.maxFrameBeforeHello == 1_024)
        #expect(limits.problem == nil)
        // A client waiting for HELLO_OK keeps the longer default.
        #expect(SessionTimeouts().handshakeMs == 45_000)
    }

    @Test("a source address past its pending cap is refused; another address is not")
    func perAddressCap() {
        var control = Self.control()
        #expect(control.arrived(1, from: "10.0.0.1") == nil)
        #expect(control.arrived(2, from: "10.0.0.1") == nil)
        #expect(control.arrived(3, from: "10.0.0.1") == .pendingPerAddress)
        #expect(control.arrived(4, from: "10.0.0.2") == nil)
        #expect(control.pendingCount == 3)
        #expect(control.pendingCount(from: "10.0.0.1") == 2)
        // A pending connection that closes frees its address's slot.
        control.closed(1)
        #expect(control.pendingCount(from: "10.0.0.1") == 1)
        #expect(control.arrived(5, from: "10.0.0.1") == nil)
    }

    @Test("past the overall pending cap every address is refused")
    func overallCap() {
        var control = Self.control(pending: 3, perAddress: 2)
        #expect(control.arrived(1, from: "a") == nil)
        #expect(control.arrived(2, from: "b") == nil)
        #expect(control.arrived(3, from: "c") == nil)
        #expect(control.arrived(4, from: "d") == .pendingHandshakes)
        #expect(control.pendingCount == 3)
    }

    @Test("admitted peers leave the pending caps and only they count toward maxConnections")
    func admittedSlots() {
        var control = Self.control(pending: 3, perAddress: 2, admitted: 2)
        #expect(control.arrived(1, from: "a") == nil)
        #expect(control.arrived(2, from: "a") == nil)
        #expect(control.arrived(3, from: "a") == .pendingPerAddress)
        #expect(control.mayAdmit() == nil)
        control.admitted(1)
        #expect(control.pendingCount == 1 && control.admittedCount == 1)
        // The admitted peer freed a pending slot, and its address's.
        #expect(control.arrived(3, from: "a") == nil)
        control.admitted(2)
        #expect(control.admittedCount == 2)
        #expect(control.mayAdmit() == .connectionLimit)
        // Pending connections do not take admitted slots: a full pending cap leaves them.
        #expect(control.arrived(4, from: "b") == nil)
        #expect(control.arrived(5, from: "c") == nil)
        #expect(control.arrived(6, from: "d") == .pendingHandshakes)
        control.closed(1)
        #expect(control.mayAdmit() == nil)
        control.closed(1)
        #expect(control.admittedCount == 1, "closing twice changes nothing")
        control.closed(2)
        control.closed(3)
        control.closed(4)
        control.closed(5)
        #expect(control.pendingCount == 0 && control.admittedCount == 0 && control.pendingCount(from: "a") == 0)
    }

    @Test("a reserved slot counts toward maxConnections until it is taken or cancelled")
    func reservedSlots() {
        var control = Self.control(pending: 4, perAddress: 4, admitted: 2)
        #expect(control.arrived(1, from: "a") == nil)
        #expect(control.arrived(2, from: "a") == nil)
        #expect(control.arrived(3, from: "a") == nil)
        #expect(control.reserveSlot() == nil)
        #expect(control.reserveSlot() == nil)
        // Both slots are promised to HELLOs still being decided: a third is refused.
        #expect(control.reserveSlot() == .connectionLimit)
        #expect(control.mayAdmit() == .connectionLimit)
        control.admitted(1)
        #expect(control.admittedCount == 1 && control.reserveSlot() == .connectionLimit)
        // The service refused the other HELLO: its slot is free again.
        control.cancelReservation()
        #expect(control.reserveSlot() == nil)
        control.admitted(3)
        #expect(control.admittedCount == 2 && control.reserveSlot() == .connectionLimit)
        control.closed(1)
        #expect(control.reserveSlot() == nil)
    }

    @Test("refusals are counted; their log lines come at most once per interval per reason, with what was held back")
    func rateLimitedLog() {
        var control = Self.control()
        #expect(control.refused(.pendingPerAddress, now: 10_000) == 1)
        #expect(control.refused(.pendingPerAddress, now: 10_100) == nil)
        #expect(control.refused(.pendingPerAddress, now: 10_999) == nil)
        // Another reason has its own line.
        #expect(control.refused(.handshakeTimeout, now: 10_500) == 1)
        #expect(control.dueLogLines(now: 10_900).isEmpty)
        #expect(control.refused(.pendingPerAddress, now: 11_000) == 3)
        #expect(control.refused(.pendingPerAddress, now: 11_200) == nil)
        let due = control.dueLogLines(now: 12_000)
        #expect(due.count == 1 && due.first?.0 == .pendingPerAddress && due.first?.1 == 1)
        #expect(control.dueLogLines(now: 20_000).isEmpty, "nothing held back, nothing due")
        #expect(control.refusals(.pendingPerAddress) == 5)
        #expect(control.refusals(.handshakeTimeout) == 1)
        #expect(control.refusals(.connectionLimit) == 0)
    }

    @Test("config keys: the service's section wins over the bare key; problems are named")
    func configKeys() {
        let config = ["store.handshake_timeout_ms": "2000", "handshake_timeout_ms": "9000", "frame_timeout_ms": "4000",
                      "gateway.max_pending_handshakes": "10", "max_pending_per_address": "8"]
        var store = ServiceLimits(name: "store", served: [])
        store.apply(configSection: "store") { config[$0].flatMap { Int($0) } }
        #expect(store.timeouts == SessionTimeouts(handshakeMs: 2_000, frameMs: 4_000))
        #expect(store.maxPendingHandshakes == 1_024 && store.maxPendingPerAddress == 8)
        var gateway = ServiceLimits(name: "gateway", served: [])
        gateway.apply(configSection: "gateway") { config[$0].flatMap { Int($0) } }
        #expect(gateway.timeouts.handshakeMs == 9_000 && gateway.maxPendingHandshakes == 10)
        gateway.maxPendingPerAddress = 0
        #expect(gateway.problem != nil)
    }
}
