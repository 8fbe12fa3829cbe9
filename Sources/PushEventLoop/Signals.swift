import CLibevent
import Glibc

extension EventLoop {
    /// Runs `handler` on this loop each time `signal` (SIGTERM, SIGINT, ...) arrives.
    ///
    /// libevent installs a process-wide handler that forwards to this loop; only one
    /// loop in a process should watch signals (libevent delivers a signal to the base
    /// that most recently started watching it). Returns an inert handler if libevent
    /// refuses, or after shutdown.
    @discardableResult
    public func onSignal(_ signal: Int32, _ handler: @escaping () -> Void) -> SignalHandler {
        SignalHandler(loop: self, signal: signal, handler: handler)
    }
}

/// A persistent signal watch; `cancel()` restores the previous disposition.
public final class SignalHandler: LoopResource {
    private let loop: EventLoop
    private var event: OpaquePointer?
    private var handler: (() -> Void)?
    public let signal: Int32

    fileprivate init(loop: EventLoop, signal: Int32, handler: @escaping () -> Void) {
        self.loop = loop
        self.signal = signal
        self.handler = handler
        guard loop.acceptsNewResources,
              let event = event_new(loop.base, signal, sp_EV_SIGNAL | sp_EV_PERSIST, signalCallback,
                                    Unmanaged.passUnretained(self).toOpaque())
        else { return }
        guard event_add(event, nil) == 0 else {
            event_free(event)
            return
        }
        self.event = event
        loop.register(self)
        // Held by the C side until cancel(), so a discarded handler keeps working.
        _ = Unmanaged.passRetained(self)
    }

    public var isActive: Bool { event != nil }

    /// Stops watching. Idempotent; safe from inside the handler.
    public func cancel() {
        guard let event else { return }
        event_free(event)
        self.event = nil
        handler = nil
        loop.unregister(self)
        Unmanaged.passUnretained(self).release()
    }

    fileprivate func fire() { handler?() }

    func closeForShutdown() { cancel() }
}

private func signalCallback(_ signal: Int32, _ what: Int16, _ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    let handler = Unmanaged<SignalHandler>.fromOpaque(context).takeUnretainedValue()
    withExtendedLifetime(handler) { handler.fire() }
}
