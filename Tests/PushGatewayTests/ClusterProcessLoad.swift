import Foundation
import PushClient
import PushWire

/// PUSHes to one device, one after another as the replies come, on a thread of its own;
/// what each PUSH_ACK said (nil: no reply or an error). A test waits for the load's own
/// progress (`waitForReplies`) rather than for a time, so a loaded machine only slows it.
final class PushLoad: @unchecked Sendable {
    struct Outcome {
        var id: String
        var ack: PushAck?
    }

    // @unchecked: the fields below are guarded by `progress`.
    private let provider: BlockingWireClient
    private let target: String
    private let progress = NSCondition()
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
                let outcome = Outcome(id: id, ack: try? provider.push(.device(target), id: id, timeoutMs: 15_000))
                progress.lock()
                outcomes.append(outcome)
                progress.broadcast()
                // A pause between pushes keeps a queue of 1000 from filling in a long test;
                // no test depends on its length.
                _ = progress.wait(until: Date(timeIntervalSinceNow: 0.01))
                progress.unlock()
            }
            progress.lock()
            done = true
            progress.broadcast()
            progress.unlock()
        }
    }

    private var isStopping: Bool {
        progress.lock()
        defer { progress.unlock() }
        return stopRequested
    }

    /// Waits until `count` more pushes have had their answer (or failed) from now on;
    /// false if `timeoutSeconds` pass first.
    @discardableResult
    func waitForReplies(_ count: Int, timeoutSeconds: Double = 30) -> Bool {
        let deadline = Date(timeIntervalSinceNow: timeoutSeconds)
        progress.lock()
        defer { progress.unlock() }
        let target = outcomes.count + count
        while outcomes.count < target {
            guard progress.wait(until: deadline) else { return false }
        }
        return true
    }

    func stop() -> [Outcome] {
        progress.lock()
        stopRequested = true
        progress.broadcast()
        while !done { progress.wait() }
        progress.unlock()
        return outcomes
    }
}

extension PushLoad {
    /// Ids whose PUSH_ACK counted the device (written or queued).
    static func counted(_ outcomes: [Outcome]) -> Set<String> {
        Set(outcomes.filter { ($0.ack?.written ?? 0) + ($0.ack?.queued ?? 0) == 1 }.map(\.id))
    }
}
