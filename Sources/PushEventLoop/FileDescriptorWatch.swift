import CLibevent
import Glibc

extension EventLoop {
    /// Watches a descriptor some other code owns and does its own I/O on (libpq's socket,
    /// say): see `FileDescriptorWatch`.
    public func watch(
        fd: Int32, onReadable: @escaping () -> Void, onWritable: @escaping () -> Void
    ) throws(EventLoopError) -> FileDescriptorWatch {
        try FileDescriptorWatch(loop: self, fd: fd, onReadable: onReadable, onWritable: onWritable)
    }
}

/// Readiness callbacks for a descriptor this loop does not own: the watch never reads,
/// writes or closes it. Loop-confined.
///
/// Reading interest is on while the watch is active (`wantsRead` can turn it off, for a
/// library that is waiting to write and would spin on a readable socket); writing interest
/// is off until `wantsWrite` is set, because a socket is writable almost always. Both are
/// level-triggered: a callback that leaves data unread is called again next iteration.
///
/// The owner holds the watch; the loop only closes it at shutdown (calling
/// `onLoopShutdown` first, so the owner can fail what it had in flight). A descriptor's
/// owner that replaces the descriptor (libpq may, while it connects) cancels this watch
/// and makes a new one: libevent must never see a closed descriptor.
public final class FileDescriptorWatch: LoopResource {
    public let fd: Int32
    private let loop: EventLoop
    private var readEvent: OpaquePointer?
    private var writeEvent: OpaquePointer?
    private var onReadable: (() -> Void)?
    private var onWritable: (() -> Void)?
    private var readArmed = false
    private var writeArmed = false
    /// Called once if the loop shuts down while the watch is active; the watch is
    /// already cancelled then.
    public var onLoopShutdown: (() -> Void)?

    /// True until `cancel()` or loop shutdown.
    public var isActive: Bool { readEvent != nil }

    /// Whether `onReadable` is called when the descriptor is readable (initially true).
    public var wantsRead: Bool = true {
        didSet { update() }
    }

    /// Whether `onWritable` is called when the descriptor is writable (initially false).
    public var wantsWrite: Bool = false {
        didSet { update() }
    }

    init(loop: EventLoop, fd: Int32, onReadable: @escaping () -> Void, onWritable: @escaping () -> Void) throws(EventLoopError) {
        guard fd >= 0 else { throw .invalidAddress("file descriptor \(fd)") }
        guard loop.acceptsNewResources else { throw .libevent("the loop is shutting down") }
        self.fd = fd
        self.loop = loop
        self.onReadable = onReadable
        self.onWritable = onWritable
        // The owner keeps the watch alive, and the watch frees its events before it dies,
        // so the C side holds an unretained pointer.
        let context = Unmanaged.passUnretained(self).toOpaque()
        readEvent = event_new(loop.base, fd, sp_EV_READ | sp_EV_PERSIST, watchReadCallback, context)
        writeEvent = event_new(loop.base, fd, sp_EV_WRITE | sp_EV_PERSIST, watchWriteCallback, context)
        guard readEvent != nil, writeEvent != nil else {
            freeEvents()
            throw .libevent("cannot create events for descriptor \(fd)")
        }
        loop.register(self)
        update()
    }

    deinit {
        if isActive {
            freeEvents()
            loop.unregister(self)
        }
    }

    /// Stops both callbacks for good and drops them (and what they capture). Idempotent,
    /// and safe from inside either callback. The descriptor stays open.
    public func cancel() {
        guard isActive else { return }
        freeEvents()
        onReadable = nil
        onWritable = nil
        onLoopShutdown = nil
        loop.unregister(self)
    }

    private func update() {
        if let readEvent, wantsRead != readArmed {
            if wantsRead { event_add(readEvent, nil) } else { event_del(readEvent) }
            readArmed = wantsRead
        }
        if let writeEvent, wantsWrite != writeArmed {
            if wantsWrite { event_add(writeEvent, nil) } else { event_del(writeEvent) }
            writeArmed = wantsWrite
        }
    }

    private func freeEvents() {
        // event_free deletes a pending event first; safe inside the event's own callback.
        if let readEvent { event_free(readEvent) }
        if let writeEvent { event_free(writeEvent) }
        readEvent = nil
        writeEvent = nil
        readArmed = false
        writeArmed = false
    }

    fileprivate func readable() {
        guard readArmed else { return }
        onReadable?()
    }

    fileprivate func writable() {
        guard writeArmed else { return }
        onWritable?()
    }

    func closeForShutdown() {
        let shutdownHandler = onLoopShutdown
        cancel()
        shutdownHandler?()
    }
}

private func watchReadCallback(_ fd: Int32, _ what: Int16, _ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    let watch = Unmanaged<FileDescriptorWatch>.fromOpaque(context).takeUnretainedValue()
    // The callback may drop the owner's last reference to the watch.
    withExtendedLifetime(watch) { watch.readable() }
}

private func watchWriteCallback(_ fd: Int32, _ what: Int16, _ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    let watch = Unmanaged<FileDescriptorWatch>.fromOpaque(context).takeUnretainedValue()
    withExtendedLifetime(watch) { watch.writable() }
}
