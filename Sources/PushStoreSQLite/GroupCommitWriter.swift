#if canImport(Glibc)
import Glibc
#endif
import PushClock
import PushEventLoop
import PushSession
import PushStoreLogic

/// The store's writer thread: every write pending when it wakes goes into one
/// transaction with one fsync, and the whole group is handed back at once (group
/// commit). Replies wait for `deliver`; nothing else does.
///
/// A write no one waits on to go on (`WriteOperation.waitsForCompany`: a read receipt,
/// batched statistics) does not wake the writer for a group of its own: it rides with the
/// next write that does, or commits `companyWaitNs` after it came. At one message in flight
/// a device's ACK and the provider's next SEND arrive together; without this the ACK took
/// the writer first and the SEND waited for the ACK's fsync before its own.
public final class GroupCommitWriter: @unchecked Sendable {
    // @unchecked: `queue`, `queuedTickets`, `stopping` and `lastSweepMs` are guarded by `mutex`; `writer` is
    // touched only by the writer thread while it runs, and by `stop`'s caller after the join.
    public typealias Ticket = UInt64

    /// Called on the writer thread with each committed group, outcomes in submission order.
    /// `nil` outcomes mean the transaction failed and nothing in the group is durable.
    public typealias Delivery = @Sendable (_ tickets: [Ticket], _ outcomes: [WriteOutcome]?) -> Void

    /// The writer thread could not be created.
    public struct StartFailure: Error, CustomStringConvertible, Sendable {
        public var errno: Int32
        public var description: String { "cannot start the writer thread: \(String(cString: strerror(errno)))" }
    }

    private let writer: PayloadWriter
    private let deliver: Delivery
    private let sweepIntervalMs: UInt64
    private let clock: @Sendable () -> UInt64
    // pthread objects must not move once initialised, so they live on the heap rather
    // than in stored properties whose address Swift does not promise to keep.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let wake = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    // Two arrays rather than one of pairs: the group goes to `commit` and `deliver` as
    // they are, without mapping each pair apart through the generic runtime.
    private var queue: [WriteOperation] = []
    private var queuedTickets: [Ticket] = []
    private var stopping = false
    /// Whether a write that is not `waitsForCompany` is queued: the writer commits at once.
    private var urgentQueued = false
    /// When the oldest queued write that waits for company came (monotonic ns), if one did.
    private var companySinceNs: UInt64?
    private var thread: pthread_t?
    private var lastSweepMs: UInt64 = 0
    // Writer-thread only: whether the writer has background work left, and when it last
    // did some. It runs whenever no write waits, and at least every `idleWorkSpacingMs`
    // under a load that never leaves the queue empty.
    private var idleWorkPending = true
    private var lastIdleWorkMs: UInt64 = 0
    static let idleWorkSpacingMs: UInt64 = 100
    /// How long a write that waits for company waits at most: a lone ACK's ACK_OK comes
    /// this much later, which no device notices; the fsync it spares is on the next SEND's path.
    public static let companyWaitNs: UInt64 = 2_000_000
    private let companyWaitNs: UInt64

    /// `companyWaitNs`: how long a write that waits for company waits at most (tests lengthen
    /// it so that what they check does not hang on the scheduler).
    public init(writer: PayloadWriter, sweepIntervalMs: UInt64, clock: @escaping @Sendable () -> UInt64 = Clocks.wallMilliseconds,
                companyWaitNs: UInt64 = GroupCommitWriter.companyWaitNs, deliver: @escaping Delivery) {
        self.writer = writer
        self.companyWaitNs = companyWaitNs
        self.deliver = deliver
        self.sweepIntervalMs = sweepIntervalMs
        self.clock = clock
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(wake, nil)
    }

    deinit {
        pthread_cond_destroy(wake)
        pthread_mutex_destroy(mutex)
        wake.deallocate()
        mutex.deallocate()
    }

    /// Starts the writer thread; a second call does nothing.
    public func start() throws(StartFailure) {
        guard thread == nil else { return }
        lastSweepMs = clock()
        // Unmanaged for C interop, not speed: pthread_create hands its start routine one context pointer.
        let box = Unmanaged.passRetained(self)
        var handle = pthread_t()
        let created = pthread_create(&handle, nil, { context in
            guard let context else { return nil }
            let writer = Unmanaged<GroupCommitWriter>.fromOpaque(context).takeRetainedValue()
            writer.run()
            return nil
        }, box.toOpaque())
        guard created == 0 else {
            box.release()
            throw StartFailure(errno: created)
        }
        thread = handle
    }

    /// Queues a write from any thread.
    public func submit(_ operation: WriteOperation, ticket: Ticket) {
        let waitsForCompany = operation.waitsForCompany
        let now = waitsForCompany ? Clocks.monotonicNanoseconds() : 0
        pthread_mutex_lock(mutex)
        queue.append(operation)
        queuedTickets.append(ticket)
        // The writer is woken by the first urgent write, and by the first that waits for
        // company (to set its deadline); the rest find it awake or due anyway.
        var wakes = false
        if !waitsForCompany {
            wakes = !urgentQueued
            urgentQueued = true
        } else if companySinceNs == nil {
            companySinceNs = now
            wakes = !urgentQueued
        }
        pthread_mutex_unlock(mutex)
        if wakes { pthread_cond_signal(wake) }
    }

    /// With `mutex` held.
    private func takeQueue(_ batch: inout [WriteOperation], _ tickets: inout [Ticket]) {
        swap(&batch, &queue)
        swap(&tickets, &queuedTickets)
        urgentQueued = false
        companySinceNs = nil
    }

    /// Commits what is queued, then ends the thread and waits for it. Idempotent.
    public func stop() {
        pthread_mutex_lock(mutex)
        stopping = true
        pthread_mutex_unlock(mutex)
        pthread_cond_signal(wake)
        if let thread { pthread_join(thread, nil) }
        thread = nil
    }

    /// Waits at most a second at a time, so that even an idle writer looks for background
    /// work (a data key added by another process) about once a second.
    private func run() {
        var batch: [WriteOperation] = []
        var tickets: [Ticket] = []
        while true {
            pthread_mutex_lock(mutex)
            waitForWork()
            takeQueue(&batch, &tickets)
            let finished = stopping && batch.isEmpty
            let sweep = sweepDue()
            if sweep { lastSweepMs = clock() }
            pthread_mutex_unlock(mutex)

            let wrote = !batch.isEmpty
            if wrote { deliver(tickets, try? writer.commit(batch)) }
            batch.removeAll(keepingCapacity: true)
            tickets.removeAll(keepingCapacity: true)
            if sweep { _ = try? writer.sweepExpired(nowMs: clock()) }
            let now = clock()
            if !finished, !wrote || now &- lastIdleWorkMs >= GroupCommitWriter.idleWorkSpacingMs {
                lastIdleWorkMs = now
                // A failed step (the database busy) is tried again on the next round.
                idleWorkPending = (try? writer.idleStep(nowMs: now)) ?? false
            }
            if finished { return }
        }
    }

    /// With `mutex` held: returns when there is something to do, or after a second with
    /// nothing (for the idle work); writes that wait for company are left waiting until an
    /// urgent write comes or their time is up.
    private func waitForWork() {
        while !stopping && !urgentQueued && !sweepDue() && !idleWorkPending {
            if let since = companySinceNs {
                let now = Clocks.monotonicNanoseconds()
                let due = since &+ companyWaitNs
                if now >= due { return }
                var deadline = GroupCommitWriter.realtimeDeadline(afterNs: due &- now)
                _ = pthread_cond_timedwait(wake, mutex, &deadline)
            } else {
                var deadline = GroupCommitWriter.realtimeDeadline(afterNs: 1_000_000_000)
                if pthread_cond_timedwait(wake, mutex, &deadline) == ETIMEDOUT { return }
            }
        }
    }

    /// The condition variable waits on the real-time clock.
    private static func realtimeDeadline(afterNs delay: UInt64) -> timespec {
        var deadline = timespec()
        clock_gettime(CLOCK_REALTIME, &deadline)
        let nanoseconds = UInt64(deadline.tv_nsec) + delay
        deadline.tv_sec += Int(nanoseconds / 1_000_000_000)
        deadline.tv_nsec = Int(nanoseconds % 1_000_000_000)
        return deadline
    }

    private func sweepDue() -> Bool { clock() &- lastSweepMs >= sweepIntervalMs }
}

extension WriteOperation {
    /// Whether this write may wait for the next urgent one to share its fsync: nothing
    /// goes on while it waits. A read receipt's ACK_OK still waits for the commit ([4.10-1]);
    /// what it marks is off any sender's path. Statistics and records are batched already.
    var waitsForCompany: Bool {
        switch self {
        case .ack, .recordFetches, .pushesHanded, .tokenFailures, .loginAttempt: true
        case .store, .recall, .deviceKey: false
        }
    }
}
