import CLibevent
import Glibc

extension EventLoop {
    /// Runs `body` on this loop after `delay`, then every `delay` if `repeating`.
    ///
    /// libevent reads CLOCK_MONOTONIC_COARSE, so timers have the kernel tick's
    /// granularity (4 ms here) and may fire up to one tick early or late: right for
    /// keepalives and deadlines, not for pacing. A zero delay means "next iteration".
    ///
    /// The loop keeps a pending timer alive, so the result may be discarded for a
    /// fire-and-forget one-shot. After shutdown the timer is returned inert.
    @discardableResult
    public func schedule(after delay: Duration, repeating: Bool = false, _ body: @escaping () -> Void) -> LoopTimer {
        let timer = LoopTimer(loop: self, interval: delay, repeating: repeating, body: body)
        timer.arm()
        return timer
    }
}

/// A one-shot or repeating libevent timer. Loop-confined.
public final class LoopTimer: LoopResource {
    private let loop: EventLoop
    private var event: OpaquePointer?
    private var body: (() -> Void)?
    private var interval: timeval
    public let isRepeating: Bool
    /// True while the timer is due to fire (the C side holds a retain on it then).
    public private(set) var isPending = false

    fileprivate init(loop: EventLoop, interval: Duration, repeating: Bool, body: @escaping () -> Void) {
        self.loop = loop
        self.isRepeating = repeating
        self.interval = LoopTimer.interval(interval, repeating: repeating)
        self.body = body
        guard loop.acceptsNewResources else { return }
        let flags = repeating ? sp_EV_PERSIST : 0
        event = event_new(loop.base, -1, flags, timerCallback, Unmanaged.passUnretained(self).toOpaque())
        // Registered for its whole life, not only while pending: shutdown must free the
        // event struct of an idle timer too, before the base it points to goes away.
        if event != nil { loop.register(self) }
    }

    deinit {
        if let event {
            event_free(event)
            loop.unregister(self)
        }
    }

    /// Stops the timer; a cancelled timer never fires again unless rescheduled.
    /// Idempotent, and safe from inside its own body.
    public func cancel() {
        guard isPending, let event else { return }
        event_del(event)
        disarmed()
    }

    /// (Re)starts the countdown with a new delay, whether or not the timer is pending.
    public func reschedule(after delay: Duration) {
        interval = LoopTimer.interval(delay, repeating: isRepeating)
        arm()
    }

    /// libevent silently drops a persistent timer whose interval is zero after its first
    /// run; one microsecond keeps "every iteration" repeating (and our retain balanced).
    private static func interval(_ delay: Duration, repeating: Bool) -> timeval {
        let value = timeval(delay)
        if repeating, value.tv_sec == 0, value.tv_usec == 0 { return timeval(tv_sec: 0, tv_usec: 1) }
        return value
    }

    func arm() {
        guard let event else { return }
        // Adding a pending event again just moves its deadline.
        guard event_add(event, &interval) == 0 else { return }
        if !isPending {
            isPending = true
            _ = Unmanaged.passRetained(self)
        }
    }

    private func disarmed() {
        isPending = false
        Unmanaged.passUnretained(self).release()
    }

    fileprivate func fire() {
        guard let body else { return }
        if !isRepeating { disarmed() }
        body()
    }

    func closeForShutdown() {
        cancel()
        body = nil
        if let event {
            event_free(event)
            self.event = nil
        }
        loop.unregister(self)
    }
}

private func timerCallback(_ fd: Int32, _ what: Int16, _ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    let timer = Unmanaged<LoopTimer>.fromOpaque(context).takeUnretainedValue()
    // A one-shot gives up the C side's retain before running its body.
    withExtendedLifetime(timer) { timer.fire() }
}

extension timeval {
    init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        if seconds < 0 || (seconds == 0 && attoseconds < 0) {
            self.init(tv_sec: 0, tv_usec: 0)
        } else {
            self.init(tv_sec: Int(seconds), tv_usec: Int(attoseconds / 1_000_000_000_000))
        }
    }
}
