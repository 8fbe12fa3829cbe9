import PushWire
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
    private let maxPushTTLSeconds: UInt32
    private let seal: ClusterSeal
    /// The member name records written here are sealed under.
    private let writer: String
    private let wallClock: () -> UInt64
    private let metrics: ClusterMetrics
    /// Operations waiting per device; a key is present while a round runs for that device.
    private var waiting: [ExactName: [Operation]] = [:]
    /// Called whenever no round is running any more (for a drain that waits for them).
    var onIdle: (() -> Void)?
    /// Called for a stored record that is not read (it failed authentication or cannot be
    /// decoded), which the next write replaces: for the log.
    var onRefusedRecord: ((_ deviceID: String, _ error: ClusterQueueReadError) -> Void)?

    init(jetStream: JetStream, subjects: ClusterSubjects, capacity: Int, maxPushTTLSeconds: UInt32, seal: ClusterSeal, writer: String,
         wallClock: @escaping () -> UInt64, metrics: ClusterMetrics) {
        self.jetStream = jetStream
        self.subjects = subjects
        self.capacity = capacity
        self.maxPushTTLSeconds = maxPushTTLSeconds
        self.seal = seal
        self.writer = writer
        self.wallClock = wallClock
        self.metrics = metrics
    }

    var isIdle: Bool { waiting.isEmpty }

    /// The stream's configuration: one message per device subject, kept on disk until it
    /// is older than the longest push TTL. Every write is a new message, so only a record
    /// no push was written to for that long goes, and all its pushes had expired.
    var stream: StreamConfig {
        StreamConfig(name: subjects.streamName, subjects: [subjects.queueWildcard], maxMessagesPerSubject: 1,
                     maxAge: .seconds(Int64(maxPushTTLSeconds)))
    }

    func submit(_ operation: Operation, for deviceID: String) {
        if waiting[ExactName(deviceID)] != nil {
            waiting[ExactName(deviceID)]?.append(operation)
            return
        }
        waiting[ExactName(deviceID)] = []
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
                var current = QueueRecord(user: "")
                var replacing = false
                if let stored {
                    do throws(ClusterQueueReadError) {
                        current = try ClusterQueueRecords.read(stored, subject: subject, seal: self.seal)
                    } catch {
                        // Not trusted in part, never delivered: the queue is taken as empty,
                        // and the next write here replaces the record.
                        switch error {
                        case .unauthenticated(let reason): self.metrics.rejected(reason)
                        case .malformed: self.metrics.malformed.increment()
                        }
                        self.onRefusedRecord?(deviceID, error)
                        replacing = true
                    }
                }
                self.apply(operations, to: current, expected: stored?.sequence ?? 0, replacing: replacing, for: deviceID, attempt: attempt)
            }
        }
    }

    private func apply(_ operations: [Operation], to current: QueueRecord, expected: UInt64, replacing: Bool, for deviceID: String,
                       attempt: Int) {
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
        if record == current, !replacing {
            finish(operations, for: deviceID, taken: taken, succeeded: true)
            return
        }
        // An empty queue is sealed around an empty message: the subject keeps one either way.
        let subject = subjects.queue(of: deviceID)
        let bytes = seal.seal(record.isEmpty ? [] : record.encoded(), subject: subject, sender: writer, sentAtMs: now, nonce: expected)
        jetStream.publish(subject, bytes, expectedLastSubjectSequence: expected) { [weak self] result in
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
        if let next = waiting[ExactName(deviceID)], !next.isEmpty {
            waiting[ExactName(deviceID)] = []
            run(next, for: deviceID, attempt: 1)
        } else {
            waiting[ExactName(deviceID)] = nil
            if waiting.isEmpty { onIdle?() }
        }
    }
}

enum ClusterQueueReadError: Error, CustomStringConvertible {
    case unauthenticated(ClusterAuthError)
    case malformed(ClusterDecodeError)

    /// For the log: a refusal's reason as the metric's `reason` label names it.
    var description: String {
        switch self {
        case .unauthenticated(let reason): reason.rawValue
        case .malformed(let error): "malformed (\(error))"
        }
    }
}

enum ClusterQueueRecords {
    /// The record a stored message holds, if a node of this deployment wrote it there.
    /// Its seal covers the subject (no record moves to another device), its time must be
    /// within the window of the time JetStream stored it (a copy of an old record written
    /// again later is refused), and the sequence it replaced must come before its own.
    static func read(_ stored: StoredMessage, subject: String, seal: ClusterSeal) throws(ClusterQueueReadError) -> QueueRecord {
        let opened: ClusterSeal.Opened
        do throws(ClusterAuthError) {
            opened = try seal.open(stored.data, subject: subject)
            guard let storedAtMs = stored.storedAtMs,
                  opened.sentAtMs <= storedAtMs &+ ClusterSeal.windowMs, storedAtMs <= opened.sentAtMs &+ ClusterSeal.windowMs
            else { throw .stale }
            guard opened.nonce < stored.sequence else { throw .replayed }
        } catch {
            throw .unauthenticated(error)
        }
        do throws(ClusterDecodeError) {
            return try QueueRecord(decoding: opened.message)
        } catch {
            throw .malformed(error)
        }
    }
}
