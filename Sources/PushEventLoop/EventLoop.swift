import CLibevent
import Glibc

/// One libevent `event_base`, owned by the thread that created it.
///
/// Everything created on a loop (connections, listeners, timers, signal handlers) is
/// confined to that thread, so none of those types is `Sendable`. Other threads reach
/// the loop only through its `handle` (see `LoopHandle`).
///
/// Lifetime: open resources keep their loop alive. `shutdown()` closes every resource
/// still open on the loop and frees the event base; call it on the loop thread once
/// `run()` has returned (`EventLoopThread` does this for you).
public final class EventLoop {
    let base: OpaquePointer
    /// The thread-safe face of this loop: cross-thread `execute` and `stop`.
    public let handle: LoopHandle

    private var wakeupEvent: OpaquePointer?
    /// Runs after the I/O callbacks of an iteration in which connections wrote.
    private var flushEvent: OpaquePointer?
    /// Transports queued for that flush: a list through the transports themselves
    /// (`nextToFlush`), each holding one retain while queued, so queueing appends nothing
    /// to an array.
    private var flushHead: Unmanaged<PlainTCPTransport>?
    private var flushTail: Unmanaged<PlainTCPTransport>?
    /// Small writes on plain TCP wait here for the flush instead of in an evbuffer of
    /// their own (see `PlainTCPTransport.write`): `stagingSlotCount` slots of
    /// `stagingSlotSize` bytes, handed out in order and all reused once none is in use.
    let stagingArena = UnsafeMutableRawPointer.allocate(
        byteCount: EventLoop.stagingSlotCount * EventLoop.stagingSlotSize, alignment: 16)
    /// Which transport holds each slot (nil: free), so a full arena can be sent early.
    private let stagingOwners = UnsafeMutablePointer<Unmanaged<PlainTCPTransport>?>.allocate(
        capacity: EventLoop.stagingSlotCount)
    private var nextStagingSlot = 0
    private var stagingSlotsInUse = 0
    static let stagingSlotSize = 512
    static let stagingSlotCount = 128
    /// Where connections read into (see ConnectionReading): one read takes at
    /// most this much, and level-triggered epoll brings the connection back for the rest.
    let readScratch = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)
    /// Swapped with the wakeup queue's pending list so a drain allocates nothing.
    private var spareWork: [LoopWork] = []
    /// Everything shutdown() must close. Entries are removed before their object dies.
    private var resources: [ObjectIdentifier: ResourceRef] = [:]
    /// The first open connection (see `linkConnection`); the list holds no references:
    /// a connection unlinks itself when it closes, before it can be freed.
    @exclusivity(unchecked) private unowned(unsafe) var firstConnection: Connection?
    public private(set) var isShutDown = false
    private var isShuttingDown = false
    private var isRunning = false
    /// Connections currently open on this loop (accepted, connected or connecting).
    public internal(set) var openConnectionCount = 0
    /// See `closeAfterPendingChanges`.
    var descriptorsToClose: [Int32] = []

    /// Writing to a socket the peer has closed raises SIGPIPE, whose default action kills
    /// the process; neither libevent (writev) nor OpenSSL avoids it per call. A peer must
    /// never be able to do that, so the first loop ignores SIGPIPE process-wide (the
    /// write then fails with EPIPE, reported as a close reason).
    private static let ignoreBrokenPipe: Void = {
        signal(SIGPIPE, SIG_IGN)
    }()

    public init() throws(EventLoopError) {
        EventLoop.ignoreBrokenPipe
        guard let config = event_config_new() else { throw .libevent("event_config_new failed") }
        // We never share a base between threads (cross-thread work goes through the
        // eventfd), so libevent's internal locking would be pure overhead.
        event_config_set_flag(config, Int32(EVENT_BASE_FLAG_NOLOCK.rawValue))
        // Coalesces the epoll_ctl add/del a bufferevent does every iteration for its
        // write event into one change per fd per iteration.
        event_config_set_flag(config, Int32(EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST.rawValue))
        let created = event_base_new_with_config(config)
        event_config_free(config)
        guard let base = created else { throw .libevent("event_base_new failed") }
        let fd = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        guard fd >= 0 else {
            let code = errno
            event_base_free(base)
            throw .system(operation: "eventfd", errno: code)
        }
        self.base = base
        self.handle = LoopHandle(queue: WakeupQueue(fd: fd), owner: ThreadSerial.current)
        // The loop owns this event and frees it before itself, so an unretained
        // context pointer is enough.
        // (From here on, a throw runs deinit, which frees the base and the event.)
        let context = Unmanaged.passUnretained(self).toOpaque()
        wakeupEvent = event_new(base, fd, sp_EV_READ | sp_EV_PERSIST, wakeupCallback, context)
        guard let wakeupEvent, event_add(wakeupEvent, nil) == 0 else {
            throw .libevent("cannot register the wakeup eventfd")
        }
        // Never added, only made active: no fd, no timeout.
        flushEvent = event_new(base, -1, 0, flushCallback, context)
        guard flushEvent != nil else { throw .libevent("cannot create the flush event") }
        stagingOwners.initialize(repeating: nil, count: EventLoop.stagingSlotCount)
    }

    deinit {
        // Open resources hold strong references to the loop, so reaching deinit means
        // they are all closed already; only the base itself is left to free.
        if !isShutDown { releaseBase() }
    }

    /// True on the thread that created this loop.
    public var isInLoopThread: Bool { handle.isInLoopThread }

    /// Runs callbacks until `stop()` (or `handle.stop()` from another thread).
    public func run() {
        precondition(isInLoopThread, "EventLoop.run() must be called on the thread that created the loop")
        guard !isShutDown, !isRunning else { return }
        isRunning = true
        defer { isRunning = false }
        event_base_loop(base, EVLOOP_NO_EXIT_ON_EMPTY)
    }

    /// One pass: handles whatever is ready (and, if `blocking`, first waits for something).
    public func runOnce(blocking: Bool = false) {
        precondition(isInLoopThread, "EventLoop.runOnce() must be called on the thread that created the loop")
        guard !isShutDown, !isRunning else { return }
        isRunning = true
        defer { isRunning = false }
        event_base_loop(base, blocking ? EVLOOP_ONCE : EVLOOP_NONBLOCK)
    }

    /// Makes `run()` return after the current callback. Loop thread only; from another
    /// thread use `handle.stop()`.
    public func stop() {
        guard !isShutDown else { return }
        event_base_loopbreak(base)
    }

    /// Queues `work` to run on this loop; see `LoopHandle.execute`.
    @discardableResult
    public func execute(_ work: @escaping @Sendable () -> Void) -> Bool {
        handle.execute(work)
    }

    /// Closes every connection, listener, timer and signal handler still open on this
    /// loop (connections report `.loopShutdown`), drops queued cross-thread work and
    /// frees the event base. Idempotent; loop thread only; not from inside `run()`.
    public func shutdown() {
        guard !isShutDown, !isShuttingDown else { return }
        precondition(isInLoopThread, "EventLoop.shutdown() must be called on the loop thread")
        precondition(!isRunning, "EventLoop.shutdown() must not be called from inside run(); stop() first")
        isShuttingDown = true
        // Every closeForShutdown unregisters its resource, and nothing new can register
        // while isShuttingDown is set, so one pass empties the table.
        // Strong references first: closing one resource may close and free another.
        var batch: [any LoopResource] = resources.values.map { $0.object }
        var connection = firstConnection
        while let current = connection {
            batch.append(current)
            connection = current.nextOnLoop
        }
        for resource in batch { resource.closeForShutdown() }
        assert(resources.isEmpty && firstConnection == nil, "a loop resource did not unregister on shutdown")
        isShutDown = true
        releaseBase()
    }

    private func releaseBase() {
        handle.queue.close()
        if let wakeupEvent {
            event_free(wakeupEvent)
            self.wakeupEvent = nil
        }
        if let flushEvent {
            event_free(flushEvent)
            self.flushEvent = nil
        }
        var queued = flushHead
        flushHead = nil
        flushTail = nil
        while let current = queued {
            let transport = current.takeUnretainedValue()
            queued = transport.nextToFlush
            transport.nextToFlush = nil
            transport.flushQueued = false
            current.release()
        }
        event_base_free(base)
        // The base's epoll set is gone, and with it any registration of these.
        for fd in descriptorsToClose { Glibc.close(fd) }
        descriptorsToClose = []
        readScratch.deallocate()
        stagingArena.deallocate()
        stagingOwners.deallocate()
    }

    // MARK: - Internals for the loop's resources

    /// New resources are refused once shutdown has begun.
    var acceptsNewResources: Bool { !isShuttingDown && !isShutDown }

    func register(_ resource: some LoopResource) {
        resources[ObjectIdentifier(resource)] = ResourceRef(object: resource)
    }

    func unregister(_ resource: some LoopResource) {
        resources.removeValue(forKey: ObjectIdentifier(resource))
    }

    /// Open connections are kept apart from the other resources, in a doubly linked list
    /// through the connections themselves: a server holds thousands, and an entry in
    /// `resources` would cost each about 40 bytes (a connection's two links cost 16).
    func linkConnection(_ connection: Connection) {
        connection.previousOnLoop = nil
        connection.nextOnLoop = firstConnection
        firstConnection?.previousOnLoop = connection
        firstConnection = connection
        openConnectionCount += 1
    }

    /// Idempotent only through the caller: a connection unlinks once, when it closes.
    func unlinkConnection(_ connection: Connection) {
        if let previous = connection.previousOnLoop {
            previous.nextOnLoop = connection.nextOnLoop
        } else {
            firstConnection = connection.nextOnLoop
        }
        connection.nextOnLoop?.previousOnLoop = connection.previousOnLoop
        connection.previousOnLoop = nil
        connection.nextOnLoop = nil
        openConnectionCount -= 1
    }

    /// Called by a plain-TCP connection's first write of an iteration. An event made
    /// active now runs once the callbacks already active this iteration have run, so
    /// every write they make lands in the same flush.
    func queueFlush(_ transport: PlainTCPTransport) {
        let entry = Unmanaged.passRetained(transport)
        if let flushTail {
            flushTail._withUnsafeGuaranteedRef { $0.nextToFlush = entry }
        } else {
            flushHead = entry
            if let flushEvent { event_active(flushEvent, Int32(sp_EV_TIMEOUT), 0) }
        }
        flushTail = entry
    }

    fileprivate func flushConnections() {
        // A flush may close a connection whose handler writes elsewhere: those writes
        // queue on the (now empty) list and re-activate the event.
        var queued = flushHead
        flushHead = nil
        flushTail = nil
        while let current = queued {
            // The list's own retain keeps it alive until the release below.
            current._withUnsafeGuaranteedRef { transport in
                queued = transport.nextToFlush
                transport.nextToFlush = nil
                transport.flush()
            }
            current.release()
        }
    }

    // MARK: - Staging small writes

    /// A free slot's index, or nil if every slot is taken even after sending what the
    /// slots hold now (the caller then buffers in an evbuffer).
    func takeStagingSlot(for transport: PlainTCPTransport) -> Int? {
        if nextStagingSlot == EventLoop.stagingSlotCount {
            // The turn's staging is full: send it now, which frees the slots.
            sendStagedEarly()
            guard stagingSlotsInUse == 0 else { return nil }
        }
        let slot = nextStagingSlot
        nextStagingSlot += 1
        stagingSlotsInUse += 1
        stagingOwners[slot] = Unmanaged.passUnretained(transport)
        return slot
    }

    func releaseStagingSlot(_ slot: Int) {
        stagingOwners[slot] = nil
        stagingSlotsInUse -= 1
        if stagingSlotsInUse == 0 { nextStagingSlot = 0 }
    }

    @inline(__always)
    func stagingSlot(_ slot: Int) -> UnsafeMutableRawPointer {
        stagingArena + slot &* EventLoop.stagingSlotSize
    }

    /// Every slot's bytes to its socket now (nothing is reported to an owner from here:
    /// a handler may be mid-call); what the kernel refuses moves to the transport's
    /// evbuffer, which the end-of-turn flush handles.
    private func sendStagedEarly() {
        for slot in 0..<nextStagingSlot {
            stagingOwners[slot]?.takeUnretainedValue().sendStaged(early: true)
        }
    }

    fileprivate func drainWakeups() {
        var batch: [LoopWork] = []
        swap(&batch, &spareWork)
        handle.queue.take(swappingWith: &batch)
        for item in batch {
            switch item {
            case .run(let work): work()
            case .runWithLoop(let work): work(self)
            case .stop: stop()
            }
        }
        batch.removeAll(keepingCapacity: true)
        if spareWork.capacity < batch.capacity { swap(&batch, &spareWork) }
    }
}

/// Something a loop must close when it shuts down.
protocol LoopResource: AnyObject {
    func closeForShutdown()
}

struct ResourceRef {
    // Safe: a resource unregisters itself before it can be deallocated.
    unowned(unsafe) let object: any LoopResource
}

private func flushCallback(_ fd: Int32, _ what: Int16, _ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    let loop = Unmanaged<EventLoop>.fromOpaque(context).takeUnretainedValue()
    withExtendedLifetime(loop) { loop.flushConnections() }
}

private func wakeupCallback(_ fd: Int32, _ what: Int16, _ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    let loop = Unmanaged<EventLoop>.fromOpaque(context).takeUnretainedValue()
    withExtendedLifetime(loop) { loop.drainWakeups() }
}
