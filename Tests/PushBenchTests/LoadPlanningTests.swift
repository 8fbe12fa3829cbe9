import PushWire
import Testing
import PushEventLoop
@testable import PushBench

/// The bench's own bookkeeping, without sockets.
struct LoadPlanningTests {
    @Test func sourceAddressesSpreadPastOneAddressWorthOfPorts() {
        var plan = SourceAddressPlan()
        let gateway = HostPort(host: "127.0.0.1", port: 7071)
        let sources = (0..<(2 * SourceAddressPlan.perAddress + 1)).map { _ in plan.next(for: gateway) }
        #expect(sources[0] == nil)
        #expect(sources[SourceAddressPlan.perAddress - 1] == nil)
        #expect(sources[SourceAddressPlan.perAddress] == "127.0.0.2")
        #expect(sources.last == "127.0.0.3")
        // Each destination has its own port range; the store starts again at the default.
        #expect(plan.next(for: HostPort(host: "127.0.0.1", port: 7070)) == nil)
    }

    @Test func opTokensFindTheirSlotOnlyWhileLive() throws {
        var table = OpTable(capacity: 4)
        let allocated = table.allocate(start: 10, measured: true)
        let first = try #require(allocated)
        #expect(first.token != 0)
        #expect(table.slot(of: first.token) == first.slot)
        table.release(first.slot)
        #expect(table.slot(of: first.token) == nil)
        let reallocated = table.allocate(start: 20, measured: false)
        let again = try #require(reallocated)
        #expect(again.slot == first.slot)
        #expect(again.token != first.token)
        for _ in 0..<3 { _ = table.allocate(start: 0, measured: false) }
        let overflow = table.allocate(start: 0, measured: false)
        #expect(overflow == nil)
        #expect(table.outstanding == 4)
    }

    @Test func shapesOutOfBoundsAreRefused() {
        var shape = Scenario.store.defaultShape
        #expect(throws: Never.self) { try shape.validate() }
        shape.inflight = 0
        #expect(throws: BenchError.self) { try shape.validate() }
        shape = Scenario.store.defaultShape
        shape.connections = 1_000
        shape.inflight = 1_000
        #expect(throws: BenchError.self) { try shape.validate() }
        shape = Scenario.e2e.defaultShape
        shape.stop = .duration(0)
        #expect(throws: BenchError.self) { try shape.validate() }
    }

    @Test func fieldScanFindsOneFieldAndRefusesTruncation() throws {
        let id = PayloadID(high: 1, low: 2)
        let frame = Message.storeOK(StoreOK(id: id, expiresAt: 99)).encoded(correlation: 5)
        try frame.withUnsafeBytes { raw in
            let body = UnsafeRawBufferPointer(rebasing: raw[FrameHeader.size...])
            #expect(FieldScan.payloadID(in: body) == id)
            #expect(FieldScan.value(of: FieldTag.payload.rawValue, in: body) == nil)
            let cut = UnsafeRawBufferPointer(rebasing: body[..<(body.count - 1)])
            #expect(FieldScan.payloadID(in: cut) == nil)
            _ = try #require(FieldScan.value(of: FieldTag.expiresAt.rawValue, in: body))
        }
    }

    @Test func endpointsParse() {
        #expect(HostPort(parsing: "127.0.0.1:7070") == HostPort(host: "127.0.0.1", port: 7070))
        #expect(HostPort(parsing: "[::1]:7070") == HostPort(host: "::1", port: 7070))
        #expect(HostPort(parsing: "127.0.0.1") == nil)
        #expect(HostPort(parsing: "::1:7070") == nil, "an IPv6 host needs brackets")
    }
}
