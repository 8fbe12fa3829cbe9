import Foundation
import PushClient
import PushWire

/// PUSHes to one device, one after another as fast as the replies come, on a thread of
/// its own; what each PUSH_ACK said (nil: no reply or an error).
final class PushLoad: @unchecked Sendable {
    struct Outcome {
        var id: String
        var ack: PushAck?
    }

    // @unchecked: `outcomes` is written by the load thread only until `stop()` has joined it.
    private let provider: BlockingWireClient
    private let target: String
    private let stopping = NSCondition()
    private var stopRequested = false
    private var done = false
    private var outcomes: [Outcome] = []

    private let prefix: String

    init(provider: BlockingWireClient, target: String, prefix: String = "load") {
        self.provider = provider
        self.target = target
        self.prefix = prefix
    }

    func start() {
        Thread.detachNewThread { [self] in
            var serial = 0
            while !isStopping {
                serial += 1
                let id = "\(prefix)-\(serial)"
                outcomes.append(Outcome(id: id, ack: try? provider.push(.device(target), id: id, timeoutMs: 15_000)))
                Thread.sleep(forTimeInterval: 0.01)
            }
            stopping.lock()
            done = true
            stopping.broadcast()
            stopping.unlock()
        }
    }

    private var isStopping: Bool {
        stopping.lock()
        defer { stopping.unlock() }
        return stopRequested
    }

    func stop() -> [Outcome] {
        stopping.lock()
        stopRequested = true
        while !done { stopping.wait() }
        stopping.unlock()
        return outcomes
    }
}

extension PushLoad {
    /// Ids whose PUSH_ACK counted the device (written or queued).
    static func counted(_ outcomes: [Outcome]) -> Set<String> {
        Set(outcomes.filter { ($0.ack?.written ?? 0) + ($0.ack?.queued ?? 0) == 1 }.map(\.id))
    }
}
