import PushGateway
import Testing

/// Collapse keys are identifiers, compared as exact bytes ([3.3-9], [4.13-5]).
@Suite("Collapse keys as exact bytes")
struct CollapseKeyBytesTests {
    @Test("[3.3-9] [4.13-5] a queued push collapses only under the same bytes: \"zoë\" in NFC and in NFD are two keys")
    func collapseByBytes() {
        func push(_ sequence: UInt32, key: String) -> QueuedPush {
            QueuedPush(sequence: sequence, frame: [], priority: 5, collapseKey: key, expiresAtMs: 1_000)
        }
        var queue = DeviceQueue(capacity: 5)
        #expect(queue.enqueue(push(1, key: "zo\u{EB}"), nowMs: 0) == .queued)
        #expect(queue.enqueue(push(2, key: "zoe\u{308}"), nowMs: 0) == .queued, "another key: nothing collapses")
        #expect(queue.enqueue(push(3, key: "zo\u{EB}"), nowMs: 0) == .collapsed)
        #expect(queue.entries.map(\.sequence) == [2, 3])
    }
}
