import Glibc
import Synchronization

/// A unit of cross-thread work. Kept as an enum so neither variant needs a wrapping
/// closure (one allocation per post is the producer's own closure context, no more).
enum LoopWork: Sendable {
    case run(@Sendable () -> Void)
    case runWithLoop(@Sendable (EventLoop) -> Void)
    case stop
}

/// Mutex-protected work list plus an eventfd the loop polls.
///
/// Only the post that finds the list un-signalled writes the eventfd, so a burst of
/// posts costs one syscall and the loop drains the whole burst in one wakeup: that is
/// the batching a group-commit writer thread relies on.
final class WakeupQueue: Sendable {
    private struct State {
        var pending: [LoopWork] = []
        var signalled = false
        var closed = false
    }

    private let state = Mutex(State())
    let fd: Int32

    init(fd: Int32) { self.fd = fd }

    // The fd lives as long as anyone can post, so a late post never writes to a closed
    // (or, worse, reused) descriptor.
    deinit { Glibc.close(fd) }

    func post(_ work: LoopWork) -> Bool {
        let (accepted, mustSignal) = state.withLock { state -> (Bool, Bool) in
            guard !state.closed else { return (false, false) }
            state.pending.append(work)
            if state.signalled { return (true, false) }
            state.signalled = true
            return (true, true)
        }
        if mustSignal {
            var one: UInt64 = 1
            // Can only fail if the counter would overflow 2^64-2: impossible here.
            _ = write(fd, &one, MemoryLayout<UInt64>.size)
        }
        return accepted
    }

    /// Loop thread: reset the eventfd, then take everything queued so far.
    /// `spare` must be empty; it comes back holding the work.
    func take(swappingWith spare: inout [LoopWork]) {
        var counter: UInt64 = 0
        // Resetting before taking the list is what makes the race benign: a post that
        // lands after the take sees signalled == false and writes the eventfd again.
        _ = read(fd, &counter, MemoryLayout<UInt64>.size)
        state.withLock { state in
            swap(&state.pending, &spare)
            state.signalled = false
        }
    }

    /// Refuses further posts and drops what was queued.
    func close() {
        let dropped = state.withLock { state -> [LoopWork] in
            state.closed = true
            let dropped = state.pending
            state.pending = []
            return dropped
        }
        // Released outside the lock: a closure's captures may run arbitrary deinits.
        _ = consume dropped
    }
}

/// The thread-safe face of an `EventLoop`: any thread may hold one and use it.
public final class LoopHandle: Sendable {
    let queue: WakeupQueue
    /// The loop thread's `ThreadSerial`.
    private let owner: UInt
    /// Connection objects made on this loop and not yet deallocated, open or not. Kept
    /// here because a connection's last release may happen on any thread.
    let connectionObjects = Atomic<Int>(0)

    /// A leak detector per loop, which other loops in the process do not disturb.
    public var liveConnectionObjects: Int { connectionObjects.load(ordering: .relaxed) }

    init(queue: WakeupQueue, owner: UInt) {
        self.queue = queue
        self.owner = owner
    }

    /// True on the loop's own thread.
    public var isInLoopThread: Bool { ThreadSerial.current == owner }

    /// Runs `work` on the loop thread during a later iteration, in posting order per
    /// producer. Work posted from the loop thread itself also waits for the next
    /// wakeup, never runs inline. Returns false (and drops `work`) once the loop has
    /// shut down.
    @discardableResult
    public func execute(_ work: @escaping @Sendable () -> Void) -> Bool {
        queue.post(.run(work))
    }

    /// Like `execute`, handing the work the loop itself (which cannot cross threads).
    @discardableResult
    public func executeWithLoop(_ work: @escaping @Sendable (EventLoop) -> Void) -> Bool {
        queue.post(.runWithLoop(work))
    }

    /// Makes the loop's `run()` return, from any thread. Unlike `EventLoop.stop()` it is
    /// not lost if it arrives before `run()` starts.
    public func stop() {
        _ = queue.post(.stop)
    }
}

/// Carries a loop-confined value through `@Sendable` closures, checking on every access
/// that it is back on the loop's thread (SwiftNIO's `NIOLoopBound`).
///
/// `@unchecked Sendable` is sound because the value is only ever read or written on the
/// owning loop thread; the precondition turns any other use into a trap, not a race.
public struct LoopBound<Value>: @unchecked Sendable {
    private var storage: Value
    public let handle: LoopHandle

    public init(_ value: Value, loop: EventLoop) {
        precondition(loop.isInLoopThread, "LoopBound must be created on its loop's thread")
        storage = value
        handle = loop.handle
    }

    public var value: Value {
        get {
            precondition(handle.isInLoopThread, "LoopBound value used off its loop thread")
            return storage
        }
        set {
            precondition(handle.isInLoopThread, "LoopBound value used off its loop thread")
            storage = newValue
        }
    }
}
