import Glibc
import PushEventLoop
import Synchronization

/// What a service is to the `ServiceLoopGroup` that runs it on one loop of several. Like
/// every service it is loop-confined: the group calls it on its own loop only.
public protocol LoopGroupMember: AnyObject {
    var loop: EventLoop { get }
    var port: Int { get }
    var listeningAddresses: [String] { get }
    var metrics: MetricsRegistry { get }
    func readiness() -> Readiness
    /// Graceful stop ([5.5-1]); `drained` runs on the member's loop.
    func drain(then drained: @escaping () -> Void)
    func stop()
    /// What another loop needs to accept on this member's listening sockets too.
    func shareListener() throws(EventLoopError) -> SharedListenSockets
    /// Serves a socket another loop accepted and placed here (`LoopSeat.spreadingAccepts`).
    func takeOver(acceptedSocket fd: Int32)
}

/// The members of a service's loops, for work one loop hands another: any thread; a
/// member is used on its own loop only.
public final class LoopMembers<Member: LoopGroupMember>: Sendable {
    public let count: Int
    private let members: Mutex<[LoopBound<Member>?]>
    private let turn = Atomic<Int>(0)

    public init(count: Int) {
        self.count = count
        members = Mutex(Array(repeating: nil, count: count))
    }

    /// On the member's own loop thread, once it is ready to take work from the others.
    func register(_ member: Member, index: Int) {
        let bound = LoopBound(member, loop: member.loop)
        members.withLock { $0[index] = bound }
    }

    /// That loop has stopped and takes no more work.
    func unregister(index: Int) {
        members.withLock { $0[index] = nil }
    }

    /// Runs `work` with loop `index`'s member on that loop's thread, during a later turn.
    /// False (and `work` dropped) when that loop is not running.
    @discardableResult
    public func withMember(_ index: Int, _ work: @escaping @Sendable (Member) -> Void) -> Bool {
        guard let bound = members.withLock({ $0[index] }) else { return false }
        return bound.handle.execute { work(bound.value) }
    }

    /// The loops in turn, for spreading connections evenly.
    func nextInTurn() -> Int {
        turn.add(1, ordering: .relaxed).oldValue % count
    }
}

/// One loop's place in a service of several, handed to the member started on it.
public struct LoopSeat<Member: LoopGroupMember>: Sendable {
    public let index: Int
    /// The first loop's listening sockets, which the other loops accept on too; nil for
    /// the first loop, which binds them.
    public let listening: SharedListenSockets?
    /// The process's connection caps, one count for every loop.
    public let admission: AdmissionGate
    public let members: LoopMembers<Member>

    public var count: Int { members.count }

    /// The loop that speaks for the process: it alone logs what every loop would, counts
    /// what the loops share, and prunes the process-wide limits.
    public var speaksForProcess: Bool { index == 0 }

    /// A `Listener.dispatch` that gives each accepted socket to the loops in turn, before a
    /// byte is read (memcached's dispatch): the kernel hands a new connection to whichever
    /// loop wakes first, which on an idle machine is often the same one. A socket whose
    /// loop has stopped is served here.
    public func spreadingAccepts() -> (Int32) -> Bool {
        let members = self.members
        let index = self.index
        return { fd in
            let target = members.nextInTurn()
            guard target != index else { return false }
            return members.withMember(target) { $0.takeOver(acceptedSocket: fd) }
        }
    }
}

/// A service on one or more loop threads: the caller's loop runs the first member, which
/// binds the listening sockets; each other loop runs on a thread of its own and accepts on
/// the same sockets. The group starts them (and rolls back what started if one fails),
/// answers readiness for all of them, serves their summed metrics, drains and stops them.
/// With one loop it is exactly its one member. The service supplies only what differs:
/// how a member starts in its seat, any checks of the process as a whole, and what the
/// process shares that must stop after the loops.
///
/// Start, drain and read it on the caller's loop.
public final class ServiceLoopGroup<Member: LoopGroupMember> {
    public let first: Member
    public let members: LoopMembers<Member>
    private let others: [ServiceLoopThread<Member>]
    private let board: LoopReadinessBoard
    private let processReadiness: () -> Readiness
    private let release: () -> Void

    private init(first: Member, members: LoopMembers<Member>, others: [ServiceLoopThread<Member>], board: LoopReadinessBoard,
                 processReadiness: @escaping () -> Readiness, release: @escaping () -> Void) {
        self.first = first
        self.members = members
        self.others = others
        self.board = board
        self.processReadiness = processReadiness
        self.release = release
    }

    /// Loop threads serving, the caller's included.
    public var loopCount: Int { others.count + 1 }
    public var port: Int { first.port }
    public var listeningAddresses: [String] { first.listeningAddresses }

    /// Starts a member for each of `members`' loops: the first on `loop` (with no seat when
    /// there is one loop), the others on threads named `name-N`. `release` stops what the members share; it runs if a
    /// start fails, after a drain, and at shutdown, and must be idempotent.
    /// `processReadiness` adds checks of the group as a whole to the loops' own.
    public static func start<Failure: Error>(
        _ members: LoopMembers<Member>, name: String, admission: AdmissionGate, on loop: EventLoop,
        member start: @escaping @Sendable (LoopSeat<Member>?, EventLoop) throws(Failure) -> Member,
        processReadiness: @escaping (LoopMembers<Member>) -> Readiness = { _ in .ready },
        release: @escaping () -> Void = {},
        cannotStart: (String) -> Failure, cannotShare: (EventLoopError, _ port: Int) -> Failure
    ) throws(Failure) -> ServiceLoopGroup {
        let count = members.count
        let board = LoopReadinessBoard()
        let first: Member
        do {
            first = try start(count > 1 ? LoopSeat(index: 0, listening: nil, admission: admission, members: members) : nil, loop)
        } catch {
            release()
            throw error
        }
        guard count > 1 else {
            return ServiceLoopGroup(first: first, members: members, others: [], board: board, processReadiness: { .ready },
                                    release: release)
        }
        members.register(first, index: 0)
        let listening: SharedListenSockets
        do {
            listening = try first.shareListener()
        } catch {
            first.stop()
            release()
            throw cannotShare(error, first.port)
        }
        var others: [ServiceLoopThread<Member>] = []
        for index in 1..<count {
            let seat = LoopSeat(index: index, listening: listening, admission: admission, members: members)
            do {
                others.append(try ServiceLoopThread.start(
                    name: "\(name)-\(index)", index: index,
                    start: { loop throws(Failure) in
                        let member = try start(seat, loop)
                        members.register(member, index: index)
                        return member
                    },
                    metrics: { $0.metrics }, readiness: { $0.readiness() }, board: board, cannotStart: cannotStart))
            } catch {
                for other in others { other.thread.shutdown() }
                first.stop()
                release()
                throw error
            }
        }
        return ServiceLoopGroup(first: first, members: members, others: others, board: board,
                                processReadiness: { processReadiness(members) }, release: release)
    }

    /// Ready when every loop is: the first loop's own checks, the group's, then what each
    /// other loop last reported of its own.
    public func readiness() -> Readiness {
        let readiness = first.readiness()
        guard readiness == .ready else { return readiness }
        let process = processReadiness()
        guard process == .ready else { return process }
        return board.readiness()
    }

    /// /metrics, /healthz and /readyz on the first loop, with the metrics of every loop summed.
    public func startMonitoring(host address: String, port: Int) throws(EventLoopError) -> MonitoringEndpoint {
        try MonitoringEndpoint(loop: first.loop, host: address, port: port, metrics: first.metrics,
                               others: others.map(\.metrics)) { [weak self] in
            self?.readiness() ?? .notReady("stopped")
        }
    }

    /// The first loop's metrics registry: add process and build metrics here.
    public var metrics: MetricsRegistry { first.metrics }

    /// Graceful stop of every loop ([5.5-1]): each answers what it accepted; then what the
    /// loops share is released, and `drained` runs on the caller's loop. Then `shutdown()`
    /// ends the other threads.
    public func drain(then drained: @escaping () -> Void) {
        let release = self.release
        ServiceLoopThread.drainAll(others, on: first.loop, drainFirst: { first.drain(then: $0) }, drain: { $0.drain(then: $1) }) {
            release()
            drained()
        }
    }

    /// Stops the other loops' threads (after `drain`, or at once) and what they share; the
    /// caller's loop is the caller's to stop. Idempotent.
    public func shutdown() {
        for (offset, other) in others.enumerated() {
            members.unregister(index: offset + 1)
            other.thread.shutdown()
            board.remove(loop: offset + 1)
        }
        members.unregister(index: 0)
        release()
    }
}
