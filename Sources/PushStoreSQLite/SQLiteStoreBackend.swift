import PushEventLoop
import PushStoreLogic
import PushWire
import Synchronization

/// The embedded backend, as one loop sees it: one SQLite file, read on the loop through
/// the loop's own connection (`SQLiteStoreReads`; WAL readers never wait for the writer),
/// and written by the group-commit writer thread that every loop of the store shares
/// (`SQLiteStoreWriterGroup`). It answers reads before `read` returns.
public final class SQLiteStoreBackend: StoreBackend {
    public let path: String
    private let reads: SQLiteStoreReads
    private let group: SQLiteStoreWriterGroup
    /// Set on every ticket this loop submits, so the writer's deliveries find the loop.
    private let ticketTag: UInt64
    /// Whether `stop` stops the shared writer: a store on one loop; with several, the
    /// group stops it once every loop has drained.
    private let ownsWriter: Bool
    public var registrySequenceAtStart: UInt64 { reads.registrySequenceAtStart }
    public var onCommitted: ((_ tickets: [UInt64], _ outcomes: [WriteOutcome]?) -> Void)?
    public var sharesLoginLimits: Bool { false }
    public var location: String { path }
    public var kind: String { "sqlite" }
    /// The data directory's own probe (`WritableDirectoryProbe`) speaks for the disk.
    public var problem: String? { nil }
    public var writesWorkSinceMs: Int64? { nil }

    /// Why the backend did not start.
    public enum StartFailure: Error, CustomStringConvertible {
        case cannotOpen(path: String, SQLiteError)
        /// Serving without the stored IDs would answer NOT_FOUND for every payload.
        case cannotReadPayloadIDs(path: String, any Error)
        case cannotStartWriter(GroupCommitWriter.StartFailure)

        public var description: String {
            switch self {
            case .cannotOpen(let path, let error): "cannot open \(path): \(error)"
            case .cannotReadPayloadIDs(let path, let error): "cannot read the stored payload IDs from \(path): \(error)"
            case .cannotStartWriter(let failure): failure.description
            }
        }
    }

    /// A store on one loop: opens the database, reads every stored ID and starts the
    /// writer thread, whose commits come back on `loop`.
    public static func start(path: String, settings: StoreSettings, clock: @escaping @Sendable () -> UInt64,
                             on loop: EventLoop) throws(StartFailure) -> SQLiteStoreBackend {
        let group = try SQLiteStoreWriterGroup.start(path: path, settings: settings, clock: clock, loopCount: 1)
        do {
            return try group.attach(index: 0, on: loop, ownsWriter: true)
        } catch {
            group.stop()
            throw error
        }
    }

    init(path: String, reads: SQLiteStoreReads, group: SQLiteStoreWriterGroup, index: Int, ownsWriter: Bool) {
        self.path = path
        self.reads = reads
        self.group = group
        self.ticketTag = UInt64(index) << SQLiteStoreWriterGroup.loopShift
        self.ownsWriter = ownsWriter
    }

    public func read(_ reads: StoreReads, completion: @escaping (Result<StoreReadResult, StoreBackendError>) -> Void) {
        completion(readSynchronously(reads))
    }

    public func readNow(_ reads: StoreReads) -> Result<StoreReadResult, StoreBackendError>? {
        readSynchronously(reads)
    }

    private func readSynchronously(_ reads: StoreReads) -> Result<StoreReadResult, StoreBackendError> {
        do {
            return .success(try self.reads.read(reads))
        } catch {
            return .failure(StoreBackendError(error))
        }
    }

    public func submit(_ operation: WriteOperation, ticket: UInt64) {
        group.committer.submit(operation, ticket: ticket | ticketTag)
    }

    public func stored(_ id: PayloadID, sequence: UInt64, sealed: Bool) { reads.stored(id, sequence: sequence, sealed: sealed) }

    public func registryNotice(after cursor: UInt64, completion: @escaping (Result<RegistryNotice?, StoreBackendError>) -> Void) {
        do {
            completion(.success(try reads.registryNotice(after: cursor)))
        } catch {
            completion(.failure(StoreBackendError(error)))
        }
    }

    public func waitingPushes(after cursor: UInt64, limit: Int,
                              completion: @escaping (Result<[OutboxEntry], StoreBackendError>) -> Void) {
        do {
            completion(.success(try reads.waitingPushes(after: cursor, limit: limit)))
        } catch {
            completion(.failure(StoreBackendError(error)))
        }
    }

    /// A store on one loop: commits what the writer holds, stops its thread and
    /// checkpoints the WAL. On several loops the group does that after the last drain.
    public func stop() {
        if ownsWriter { group.stop() }
    }

    /// At once: `stop` commits what the writer thread holds before it returns.
    public func finish(then done: @escaping () -> Void) { done() }

    /// What went wrong while stopping, for the log.
    public var lastStopProblem: String? { group.lastStopProblem }
}

/// What the loops of a store on SQLite share: the writer connection and its group-commit
/// thread, and the map of stored IDs. Each loop submits with its index in the ticket's
/// top byte, and the writer's deliveries go back to each loop with that loop's tickets.
public final class SQLiteStoreWriterGroup: @unchecked Sendable {
    // @unchecked: `writer` is the writer thread's (and `stop`'s, after the thread ends);
    // `stopped` and `lastStopProblem` are guarded by `stopState`; the rest never changes.
    public let path: String
    private let settings: StoreSettings
    private let clock: @Sendable () -> UInt64
    private let writer: SQLitePayloadWriter
    let committer: GroupCommitWriter
    private let sequences: PayloadSequences
    private let routes: CommitRoutes
    private let stopState = Mutex<(stopped: Bool, problem: String?)>((false, nil))

    static let loopShift: UInt64 = 56
    static let ticketMask: UInt64 = (1 << loopShift) - 1
    /// At most this many loops share one writer (the ticket's top byte).
    public static let maxLoops = 256

    private init(path: String, settings: StoreSettings, clock: @escaping @Sendable () -> UInt64, writer: SQLitePayloadWriter,
                 committer: GroupCommitWriter, sequences: PayloadSequences, routes: CommitRoutes) {
        self.path = path
        self.settings = settings
        self.clock = clock
        self.writer = writer
        self.committer = committer
        self.sequences = sequences
        self.routes = routes
    }

    /// Opens the writer, reads every stored ID and starts the writer thread. Loops join
    /// with `attach`; deliveries for a loop that has not joined yet are dropped (its
    /// requests cannot have been submitted).
    public static func start(path: String, settings: StoreSettings, clock: @escaping @Sendable () -> UInt64,
                             loopCount: Int) throws(SQLiteStoreBackend.StartFailure) -> SQLiteStoreWriterGroup {
        let writer: SQLitePayloadWriter
        let reader: SQLitePayloadReader
        do {
            writer = try SQLitePayloadWriter(path: path)
            reader = try SQLitePayloadReader(path: path)
        } catch {
            throw .cannotOpen(path: path, error)
        }
        let sequences: PayloadSequences
        do {
            sequences = try PayloadSequences(reader: reader)
        } catch {
            throw .cannotReadPayloadIDs(path: path, error)
        }
        let routes = CommitRoutes(count: max(1, min(loopCount, maxLoops)))
        let committer = GroupCommitWriter(writer: writer, sweepIntervalMs: settings.sweepIntervalMs, clock: clock) { tickets, outcomes in
            routes.deliver(tickets, outcomes)
        }
        do {
            try committer.start()
        } catch {
            throw .cannotStartWriter(error)
        }
        return SQLiteStoreWriterGroup(path: path, settings: settings, clock: clock, writer: writer, committer: committer,
                                      sequences: sequences, routes: routes)
    }

    /// Loop `index`'s backend, with a read connection of its own; call it on that loop.
    public func attach(index: Int, on loop: EventLoop, ownsWriter: Bool = false) throws(SQLiteStoreBackend.StartFailure) -> SQLiteStoreBackend {
        let reads: SQLiteStoreReads
        do {
            let reader = try SQLitePayloadReader(path: path)
            reads = try SQLiteStoreReads(reader: reader, recheckMs: settings.usersRecheckMs, clock: clock, sequences: sequences)
        } catch let error as SQLiteError {
            throw .cannotOpen(path: path, error)
        } catch {
            throw .cannotReadPayloadIDs(path: path, error)
        }
        let backend = SQLiteStoreBackend(path: path, reads: reads, group: self, index: index, ownsWriter: ownsWriter)
        routes.attach(index: index, handle: loop.handle, target: CommitTarget(backend))
        return backend
    }

    deinit { stop() }

    /// Commits what the writer holds, stops its thread and checkpoints the WAL. Idempotent.
    public func stop() {
        let first = stopState.withLock { state in
            defer { state.stopped = true }
            return !state.stopped
        }
        guard first else { return }
        committer.stop()
        do {
            try writer.checkpoint()
        } catch {
            let problem = "WAL checkpoint failed: \(error)"
            stopState.withLock { $0.problem = problem }
        }
    }

    public var lastStopProblem: String? { stopState.withLock { $0.problem } }
}

/// Where each loop's commits go: its handle, and its backend (weakly, read on its loop).
private final class CommitRoutes: Sendable {
    private let loops: Mutex<[(handle: LoopHandle, target: CommitTarget)?]>

    init(count: Int) {
        loops = Mutex(Array(repeating: nil, count: count))
    }

    func attach(index: Int, handle: LoopHandle, target: CommitTarget) {
        loops.withLock { if $0.indices.contains(index) { $0[index] = (handle, target) } }
    }

    /// On the writer thread: each loop gets its own tickets (untagged) and their outcomes.
    func deliver(_ tickets: [UInt64], _ outcomes: [WriteOutcome]?) {
        let loops = self.loops.withLock { $0 }
        if loops.count == 1 {
            if let route = loops[0] { post(tickets, outcomes, to: route) }
            return
        }
        var ticketsByLoop = [[UInt64]](repeating: [], count: loops.count)
        var outcomesByLoop = [[WriteOutcome]](repeating: [], count: loops.count)
        for (position, ticket) in tickets.enumerated() {
            let index = Int(ticket >> SQLiteStoreWriterGroup.loopShift)
            guard index < loops.count else { continue }
            ticketsByLoop[index].append(ticket & SQLiteStoreWriterGroup.ticketMask)
            if let outcomes { outcomesByLoop[index].append(outcomes[position]) }
        }
        // A failed group goes to every loop, so that the first counts and logs it once
        // even when none of its requests were in the group.
        for (index, route) in loops.enumerated() where outcomes == nil || !ticketsByLoop[index].isEmpty {
            guard let route else { continue }
            post(ticketsByLoop[index], outcomes == nil ? nil : outcomesByLoop[index], to: route)
        }
    }

    private func post(_ tickets: [UInt64], _ outcomes: [WriteOutcome]?, to route: (handle: LoopHandle, target: CommitTarget)) {
        let target = route.target
        _ = route.handle.executeWithLoop { _ in target.backend?.onCommitted?(tickets, outcomes) }
    }
}

/// Lets the writer thread's deliveries find a loop's backend; read and written on that loop only.
private final class CommitTarget: @unchecked Sendable {
    weak var backend: SQLiteStoreBackend?

    init(_ backend: SQLiteStoreBackend) { self.backend = backend }
}
