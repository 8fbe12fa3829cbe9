import CNats
import PushEventLoop
import Synchronization

/// libnats' external-event-loop adapter, on our loop: what libnats asks for (attach to a
/// socket, start or stop reading or writing, detach) is recorded under a lock and applied
/// to a `FileDescriptorWatch` on the loop thread, whose callbacks call
/// `natsConnection_ProcessReadEvent` / `ProcessWriteEvent`.
///
/// libnats asks from several threads: ours (publishing, reading), its reconnect thread
/// (attach after a reconnect, resent subscriptions) and its timer thread (pings, a stale
/// connection). It asks while holding its connection lock, so nothing here calls back into
/// libnats while holding `requested`'s lock. Requests from another thread are posted to the
/// loop; from the loop thread they take effect at once.
///
/// `@unchecked Sendable`, for C interop (libnats' threads call in), not speed: `requested`
/// is a Mutex; everything else is touched only on the loop thread (the C callbacks reach
/// it from other threads only through `requested` and `LoopHandle.executeWithLoop`).
final class NATSSocketDriver: @unchecked Sendable {
    struct Requested {
        var connection: OpaquePointer?
        var fd: Int32 = -1
        /// Bumped by every attach: a watch made for an older socket is never trusted, even
        /// if the new socket got the same descriptor number.
        var generation = 0
        var read = false
        var write = false
        var detached = false
        var applyPosted = false
    }

    private let requested = Mutex(Requested())
    private let handle: LoopHandle
    // Loop thread only:
    private let loop: EventLoop
    private var watch: FileDescriptorWatch?
    private var watchedGeneration = -1
    /// Called after each read event (messages are waiting in sync subscriptions) and when
    /// the loop shuts down under the watch.
    var afterRead: (() -> Void)?
    var onLoopShutdown: (() -> Void)?

    init(loop: EventLoop) {
        self.loop = loop
        self.handle = loop.handle
    }

    /// The opaque pointer libnats hands back to the C callbacks (Unmanaged for C interop,
    /// not speed). Unretained: the owning
    /// connection keeps the driver alive until natsConnection_Close has returned, after
    /// which libnats calls none of them.
    var context: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    /// Whether libnats has output waiting for the socket.
    var wantsWrite: Bool { requested.withLock { !$0.detached && $0.write } }

    // MARK: requests, from any thread

    func attach(_ connection: OpaquePointer?, fd: Int32) {
        request { state in
            state.connection = connection
            state.fd = fd
            state.generation += 1
            // libnats' rule (its own adapters do this): an attached socket is read from
            // until libnats says otherwise; writing waits for output.
            state.read = true
            state.write = false
        }
    }

    func setRead(_ on: Bool) { request { $0.read = on } }
    func setWrite(_ on: Bool) { request { $0.write = on } }
    func detach() { request { $0.detached = true } }

    private func request(_ change: (inout Requested) -> Void) {
        let mustPost = requested.withLock { state -> Bool in
            change(&state)
            if handle.isInLoopThread || state.applyPosted { return false }
            state.applyPosted = true
            return true
        }
        if handle.isInLoopThread {
            apply()
        } else if mustPost {
            // The loop may be gone (shut down): then there is nothing left to drive.
            handle.execute { [self] in apply() }
        }
    }

    // MARK: the loop side

    /// Makes the watch match what was last requested: none, a new one for a new socket, or
    /// the same one with other interests.
    private func apply() {
        let state = requested.withLock { state -> Requested in
            state.applyPosted = false
            return state
        }
        guard !state.detached, state.fd >= 0, state.read || state.write else {
            // A socket libnats stopped polling is about to be closed by it (a disconnect):
            // libevent must not keep it.
            cancelWatch()
            return
        }
        if watch == nil || watchedGeneration != state.generation {
            cancelWatch()
            do throws(EventLoopError) {
                let made = try loop.watch(
                    fd: state.fd,
                    onReadable: { [weak self] in self?.readable() },
                    onWritable: { [weak self] in self?.writable() })
                made.onLoopShutdown = { [weak self] in self?.loopShutDown() }
                watch = made
                watchedGeneration = state.generation
            } catch {
                // Only a loop that is shutting down refuses a watch; its shutdown closes
                // the connection.
                return
            }
        }
        watch?.wantsRead = state.read
        watch?.wantsWrite = state.write
    }

    private func cancelWatch() {
        watch?.cancel()
        watch = nil
    }

    /// The connection to process an event for, if the watch still stands for what libnats
    /// has attached (a request to stop may be on its way from another thread).
    private func current(reading: Bool) -> OpaquePointer? {
        requested.withLock { state in
            guard !state.detached, state.generation == watchedGeneration,
                  reading ? state.read : state.write
            else { return nil }
            return state.connection
        }
    }

    private func readable() {
        guard let connection = current(reading: true) else { return }
        natsConnection_ProcessReadEvent(connection)
        afterRead?()
    }

    private func writable() {
        guard let connection = current(reading: false) else { return }
        natsConnection_ProcessWriteEvent(connection)
    }

    /// After natsConnection_Close: no socket is ours any more. Idempotent.
    func stop() {
        requested.withLock { $0.detached = true }
        cancelWatch()
        afterRead = nil
        onLoopShutdown = nil
    }

    private func loopShutDown() {
        watch = nil
        let handler = onLoopShutdown
        handler?()
    }
}

// MARK: - libnats' event loop callbacks

private func driver(_ pointer: UnsafeMutableRawPointer?) -> NATSSocketDriver? {
    guard let pointer else { return nil }
    return Unmanaged<NATSSocketDriver>.fromOpaque(pointer).takeUnretainedValue()
}

/// `loop` is the context given to natsOptions_SetEventLoop; it becomes the `userData` of
/// the other three callbacks.
func natsDriverAttach(
    _ userData: UnsafeMutablePointer<UnsafeMutableRawPointer?>?, _ loop: UnsafeMutableRawPointer?,
    _ connection: OpaquePointer?, _ socket: natsSock
) -> natsStatus {
    guard let userData, let target = driver(loop) else { return NATS_ERR }
    userData.pointee = loop
    target.attach(connection, fd: Int32(socket))
    return NATS_OK
}

func natsDriverRead(_ userData: UnsafeMutableRawPointer?, _ add: Bool) -> natsStatus {
    driver(userData)?.setRead(add)
    return NATS_OK
}

func natsDriverWrite(_ userData: UnsafeMutableRawPointer?, _ add: Bool) -> natsStatus {
    driver(userData)?.setWrite(add)
    return NATS_OK
}

func natsDriverDetach(_ userData: UnsafeMutableRawPointer?) -> natsStatus {
    driver(userData)?.detach()
    return NATS_OK
}
