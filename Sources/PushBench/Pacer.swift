#if canImport(Glibc)
import Glibc
#endif
import PushClock
import PushEventLoop
import PushSession
import Synchronization

/// The clock of an open-loop run. libevent's timers tick with CLOCK_MONOTONIC_COARSE
/// (4 ms here), far too coarse to send at 5,000/s, so a thread of its own sleeps with
/// clock_nanosleep until the next request is due and wakes the loop, which sends every
/// request due by then. Latency counts from each request's intended time, not from when
/// it was sent, so a stall in the pacer, the loop or the server is never hidden.
final class Pacer: Sendable {
    private let startNanos: UInt64
    private let intervalNanos: Double
    /// Sleeping less than this between wakeups costs more in wakeups than it gains.
    private let minimumSleepNanos: UInt64 = 50_000
    private let running = Atomic<Bool>(true)
    /// One wakeup in the loop's queue at a time; it sends everything due when it runs.
    private let posted = Atomic<Bool>(false)
    private let handle: LoopHandle
    private let tick: @Sendable () -> Void
    private let thread = Mutex<pthread_t?>(nil)

    /// `tick` runs on the loop behind `handle`.
    init(startNanos: UInt64, ratePerSecond: Double, handle: LoopHandle, tick: @escaping @Sendable () -> Void) {
        self.startNanos = startNanos
        self.intervalNanos = 1e9 / ratePerSecond
        self.handle = handle
        self.tick = tick
    }

    func start() throws(BenchError) {
        var created = pthread_t()
        // Unmanaged for C interop, not speed: pthread_create hands its start routine one context pointer.
        let context = Unmanaged.passRetained(self).toOpaque()
        let result = pthread_create(&created, nil, { context in
            guard let context else { return nil }
            let pacer = Unmanaged<Pacer>.fromOpaque(context).takeRetainedValue()
            pacer.run()
            return nil
        }, context)
        guard result == 0 else {
            Unmanaged<Pacer>.fromOpaque(context).release()
            throw .setup("cannot start the pacer thread: \(String(cString: strerror(result)))")
        }
        thread.withLock { $0 = created }
    }

    /// Ends the thread and waits for it. Idempotent.
    func stop() {
        running.store(false, ordering: .releasing)
        let joining = thread.withLock { current -> pthread_t? in
            defer { current = nil }
            return current
        }
        if let joining { pthread_join(joining, nil) }
    }

    private func run() {
        var wake = startNanos
        while running.load(ordering: .acquiring) {
            sleep(until: wake)
            if !posted.exchange(true, ordering: .acquiringAndReleasing) {
                let tick = self.tick
                handle.execute { [self] in
                    posted.store(false, ordering: .releasing)
                    tick()
                }
            }
            // Next wakeup: when the next request after now is due, but not sooner than
            // the minimum sleep (at high rates each wakeup then sends a small batch).
            let now = Clocks.monotonicNanoseconds()
            let elapsed = Double(now &- startNanos)
            let nextDue = startNanos + UInt64((elapsed / intervalNanos).rounded(.down) * intervalNanos + intervalNanos)
            wake = max(nextDue, now + minimumSleepNanos)
        }
    }

    private func sleep(until nanos: UInt64) {
        var target = timespec(tv_sec: Int(nanos / 1_000_000_000), tv_nsec: Int(nanos % 1_000_000_000))
        while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &target, nil) == EINTR {}
    }
}
