import PushNATS

/// Devices' offline queues in JetStream: one message per device (`QueueRecord`) on the
/// subject `ClusterSubjects.queue(of:)`, in a stream that keeps one message per subject.
/// Every change is read, apply, write with `Nats-Expected-Last-Subject-Sequence`, so two
/// nodes writing one queue at once never lose a push: the loser reads again and retries.
///
/// Operations on one device are serialised on this node and batched: those that arrive
/// while a round runs go together in the next. Loop-confined.
final class ClusterQueues {
    enum Operation {
        /// A push for an offline device; `done(true)` once it is in JetStream.
        case append(ClusterPush, owner: QueueOwner, done: (Bool) -> Void)
        /// What a node held for a device whose connection there ended, merged ahead of
        /// what the queue holds.
        case merge(QueueRecord, done: (Bool) -> Void)
        /// Empties the queue and hands over what it held.
        case take(done: (TakeResult) -> Void)
    }

    enum TakeResult {
        case taken(QueueRecord)
        /// The queue held nothing.
        case empty
        /// JetStream could not be read or written: the queue is as it was, to take again.
        case failed
    }

    /// Rounds retried after a conflict before the operations fail: only a queue written
    /// by many nodes at once, over and over, gets there.
    static let maxAttempts = 16

    private let jetStream: JetStream
    private let subjects: ClusterSubjects
    private let capacity: Int
    private let wallClock: () -> UInt64
    private let metrics: ClusterMetrics
    /// Operations waiting per device; a key is present while a round runs for that device.
    private var waiting: [String: [Operation]] = [:]
    /// Called whenever no round is running any more (for a drain that waits for them).
    var onIdle: (() -> Void)?

    init(jetStream: JetStream, subjects: ClusterSubjects, capacity: Int, wallClock: @escaping () -> UInt64, metrics: ClusterMetrics) {
        self.jetStream = jetStream
        self.subjects = subjects
        self.capacity = capacity
        self.wallClock = wallClock
        self.metrics = metrics
    }

    var isIdle: Bool { waiting.isEmpty }

    /// The stream's configuration: one message per device subject, kept on disk.
    static func stream(_ subjects: ClusterSubjects) -> StreamConfig {
        StreamConfig(name: subjects.streamName, subjects: [subjects.queueWildcard], maxMessagesPerSubject: 1, maxAge: .zero)
    }

    func submit(_ operation: Operation, for deviceID: String) {
        if waiting[deviceID] != nil {
            waiting[deviceID]?.append(operation)
            return
        }
        waiting[deviceID] = []
        run([operation], for: deviceID, attempt: 1)
    }

    private func run(_ operations: [Operation], for deviceID: String, attempt: Int) {
        let subject = subjects.queue(of: deviceID)
        jetStream.lastMessage(stream: subjects.streamName, subject: subject) { [weak self] result in
            guard let self else { return }
            switch result {
            case .failure:
                self.metrics.queueFailures.increment()
                self.finish(operations, for: deviceID, taken: nil, succeeded: false)
            case .success(let stored):
                let current: QueueRecord
                do {
                    current = try stored.map { try QueueRecord(decoding: $0.data) } ?? QueueRecord(user: "")
                } catch {
                    // Unreadable (damaged, or a major version this build does not read):
                    // replaced, not trusted in part.
                    self.metrics.malformed.increment()
                    current = QueueRecord(user: "")
                }
                self.apply(operations, to: current, expected: stored?.sequence ?? 0, for: deviceID, attempt: attempt)
            }
        }
    }

    private func apply(_ operations: [Operation], to current: QueueRecord, expected: UInt64, for deviceID: String, attempt: Int) {
        let now = wallClock()
        var record = current.expiring(nowWallMs: now, capacity: capacity)
        var taken: QueueRecord?
        for operation in operations {
            switch operation {
            case .append(let push, let owner, _):
                record = record.appending(push, for: owner, capacity: capacity, nowWallMs: now).0
            case .merge(let older, _):
                record = record.merging(older: older, capacity: capacity, nowWallMs: now)
            case .take:
                if !record.isEmpty {
                    taken = taken.map { record.merging(older: $0, capacity: capacity, nowWallMs: now) } ?? record
                }
                record = QueueRecord(owner: record.owner)
            }
        }
        if record == current {
            finish(operations, for: deviceID, taken: taken, succeeded: true)
            return
        }
        // An empty queue is written as an empty message: the subject keeps one either way.
        let bytes = record.isEmpty ? [] : record.encoded()
        jetStream.publish(subjects.queue(of: deviceID), bytes, expectedLastSubjectSequence: expected) { [weak self] result in
            guard let self else { return }
            switch result {
            case .success:
                self.metrics.queueWrites.increment()
                self.finish(operations, for: deviceID, taken: taken, succeeded: true)
            case .failure(let error) where error.isWrongLastSequence && attempt < ClusterQueues.maxAttempts:
                self.metrics.queueConflicts.increment()
                self.run(operations, for: deviceID, attempt: attempt + 1)
            case .failure:
                self.metrics.queueFailures.increment()
                self.finish(operations, for: deviceID, taken: nil, succeeded: false)
            }
        }
    }

    private func finish(_ operations: [Operation], for deviceID: String, taken: QueueRecord?, succeeded: Bool) {
        var takenOnce = taken
        for operation in operations {
            switch operation {
            case .append(_, _, let done), .merge(_, let done):
                done(succeeded)
            case .take(let done):
                if !succeeded {
                    done(.failed)
                } else if let record = takenOnce {
                    done(.taken(record))
                } else {
                    done(.empty)
                }
                takenOnce = nil
            }
        }
        if let next = waiting[deviceID], !next.isEmpty {
            waiting[deviceID] = []
            run(next, for: deviceID, attempt: 1)
        } else {
            waiting[deviceID] = nil
            if waiting.isEmpty { onIdle?() }
        }
    }
}
