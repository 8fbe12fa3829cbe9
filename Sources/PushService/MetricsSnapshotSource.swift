import Glibc
import PushEventLoop

/// A handle on one loop's `MetricsRegistry` that any thread may hold: it asks the loop for
/// a snapshot of the registry, which the loop takes on its own thread. Made on the
/// registry's loop thread (one per shard, say) and handed to the loop that serves
/// /metrics for the whole process (`MonitoringEndpoint`'s `others`).
///
/// The registry is held weakly: the service on that loop owns it, and a handle kept by
/// another loop must neither keep that service alive past its loop nor release it from
/// the wrong thread. A registry that is gone yields no snapshot.
public struct MetricsSource: Sendable {
    private struct WeakRegistry {
        weak var registry: MetricsRegistry?
    }

    private let bound: LoopBound<WeakRegistry>

    /// The registry's loop.
    public var loop: LoopHandle { bound.handle }

    /// On `loop`'s thread, which must be the one `registry` is used on.
    public init(_ registry: MetricsRegistry, loop: EventLoop) {
        bound = LoopBound(WeakRegistry(registry: registry), loop: loop)
    }

    /// Runs `reply` on the registry's loop with its snapshot (nil once the registry is
    /// gone). Returns false, without calling `reply`, when the loop has shut down.
    @discardableResult
    public func requestSnapshot(_ reply: @escaping @Sendable (MetricsSnapshot?) -> Void) -> Bool {
        let bound = bound
        return bound.handle.execute { reply(bound.value.registry?.snapshot()) }
    }

    /// The snapshot, taken on the registry's loop thread.
    func snapshotInLoop() -> MetricsSnapshot? {
        bound.value.registry?.snapshot()
    }

    /// Each source's snapshot, in order, waiting at most `timeout` in all; a source whose
    /// loop has shut down, whose registry is gone or which has not answered in time is
    /// left out. Blocks the calling thread. Called on a loop, name it as `callingLoop`:
    /// its own sources are then read directly (waiting for its own loop would always time
    /// out). Loops are told apart by identity, not by thread id: a thread id may be reused
    /// once a loop's thread has exited.
    public static func snapshots(of sources: [MetricsSource], timeout: Duration,
                                 callingLoop: EventLoop? = nil) -> [MetricsSnapshot] {
        gather(sources, timeout: timeout, callingLoop: callingLoop?.handle, alongside: {})
    }

    /// `snapshots(of:timeout:callingLoop:)`, running `work` on the calling thread after
    /// the requests are posted and before waiting, so the other loops snapshot meanwhile.
    ///
    /// Cannot deadlock as long as no loop a source belongs to ever waits on the calling
    /// thread: a request needs nothing but its own loop to take a turn, and the wait is
    /// bounded anyway. Two loops gathering from each other at once could each stall for
    /// `timeout`; only one loop gathers.
    static func gather(_ sources: [MetricsSource], timeout: Duration, callingLoop: LoopHandle?,
                       alongside work: () -> Void) -> [MetricsSnapshot] {
        func isCalling(_ source: MetricsSource) -> Bool { callingLoop.map { $0 === source.loop } ?? false }
        let replies = SnapshotReplies(count: sources.count)
        for (index, source) in sources.enumerated() where !isCalling(source) {
            let posted = source.requestSnapshot { snapshot in replies.deliver(snapshot, at: index) }
            if !posted { replies.deliver(nil, at: index) }
        }
        work()
        for (index, source) in sources.enumerated() where isCalling(source) {
            replies.deliver(source.snapshotInLoop(), at: index)
        }
        return replies.wait(timeoutNs: nanoseconds(timeout)).compactMap { $0 }
    }

    private static func nanoseconds(_ duration: Duration) -> UInt64 {
        let (seconds, attoseconds) = duration.components
        guard seconds >= 0, attoseconds >= 0 else { return 0 }
        return UInt64(clamping: seconds).multipliedReportingOverflow(by: 1_000_000_000).partialValue
            &+ UInt64(attoseconds / 1_000_000_000)
    }
}

/// The replies to one gathering, which the gatherer waits for with a deadline on the
/// monotonic clock (a condition variable, since `Mutex` has none). A reply after the
/// gatherer gave up is dropped.
///
/// `@unchecked Sendable`, for the lock, not speed: `replies`, `outstanding` and `finished`
/// are only touched with `lock` held, a pthread mutex (for its condition variable, which
/// `Mutex` lacks) that the compiler cannot see.
private final class SnapshotReplies: @unchecked Sendable {
    private let lock = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let arrived = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var replies: [MetricsSnapshot?]
    private var outstanding: Int
    private var finished = false

    init(count: Int) {
        replies = Array(repeating: nil, count: count)
        outstanding = count
        pthread_mutex_init(lock, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(arrived, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(arrived)
        pthread_mutex_destroy(lock)
        arrived.deallocate()
        lock.deallocate()
    }

    func deliver(_ snapshot: MetricsSnapshot?, at index: Int) {
        pthread_mutex_lock(lock)
        if !finished {
            replies[index] = snapshot
            outstanding -= 1
            if outstanding == 0 { pthread_cond_signal(arrived) }
        }
        pthread_mutex_unlock(lock)
    }

    /// What has arrived once all have or `timeoutNs` has passed, whichever is first.
    func wait(timeoutNs: UInt64) -> [MetricsSnapshot?] {
        var deadline = timespec()
        clock_gettime(CLOCK_MONOTONIC, &deadline)
        let total = UInt64(deadline.tv_nsec) + timeoutNs % 1_000_000_000
        deadline.tv_sec &+= Int(clamping: timeoutNs / 1_000_000_000 + total / 1_000_000_000)
        deadline.tv_nsec = Int(total % 1_000_000_000)
        pthread_mutex_lock(lock)
        while outstanding > 0 {
            if pthread_cond_timedwait(arrived, lock, &deadline) == ETIMEDOUT { break }
        }
        finished = true
        let result = replies
        pthread_mutex_unlock(lock)
        return result
    }
}
