import PushEventLoop
import PushWire

/// The embedded backend: one SQLite file, read on the loop (`SQLiteStoreReads`; WAL
/// readers never wait for the writer) and written by a group-commit writer thread. It
/// answers reads before `read` returns.
public final class SQLiteStoreBackend: StoreBackend {
    public let path: String
    private let reads: SQLiteStoreReads
    private let writer: SQLitePayloadWriter
    private let committer: GroupCommitWriter
    public var registrySequenceAtStart: UInt64 { reads.registrySequenceAtStart }
    public var onCommitted: ((_ tickets: [UInt64], _ outcomes: [WriteOutcome]?) -> Void)?
    public var sharesLoginLimits: Bool { false }
    public var location: String { path }
    private var stopped = false

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

    /// Opens the database, reads every stored ID and starts the writer thread, whose
    /// commits come back on `loop`.
    public static func start(path: String, settings: StoreSettings, clock: @escaping @Sendable () -> UInt64,
                             on loop: EventLoop) throws(StartFailure) -> SQLiteStoreBackend {
        let writer: SQLitePayloadWriter
        let reader: SQLitePayloadReader
        do {
            writer = try SQLitePayloadWriter(path: path)
            reader = try SQLitePayloadReader(path: path)
        } catch {
            throw .cannotOpen(path: path, error)
        }
        let handle = loop.handle
        let target = LoopTarget()
        let committer = GroupCommitWriter(writer: writer, sweepIntervalMs: settings.sweepIntervalMs, clock: clock) { tickets, outcomes in
            _ = handle.executeWithLoop { _ in target.backend?.onCommitted?(tickets, outcomes) }
        }
        let backend: SQLiteStoreBackend
        do {
            let reads = try SQLiteStoreReads(reader: reader, recheckMs: settings.usersRecheckMs, clock: clock)
            backend = SQLiteStoreBackend(path: path, reads: reads, writer: writer, committer: committer)
        } catch {
            throw .cannotReadPayloadIDs(path: path, error)
        }
        do {
            try committer.start()
        } catch {
            throw .cannotStartWriter(error)
        }
        target.backend = backend
        return backend
    }

    private init(path: String, reads: SQLiteStoreReads, writer: SQLitePayloadWriter, committer: GroupCommitWriter) {
        self.path = path
        self.reads = reads
        self.writer = writer
        self.committer = committer
    }

    deinit { committer.stop() }

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
        committer.submit(operation, ticket: ticket)
    }

    public func stored(_ id: PayloadID, sequence: UInt64) { reads.stored(id, sequence: sequence) }

    public func registryNotice(after cursor: UInt64, completion: @escaping (Result<RegistryNotice?, StoreBackendError>) -> Void) {
        do {
            completion(.success(try reads.registryNotice(after: cursor)))
        } catch {
            completion(.failure(StoreBackendError(error)))
        }
    }

    /// Commits what the writer holds, stops its thread and checkpoints the WAL.
    public func stop() {
        guard !stopped else { return }
        stopped = true
        committer.stop()
        do {
            try writer.checkpoint()
        } catch {
            lastStopProblem = "WAL checkpoint failed: \(error)"
        }
    }

    /// What went wrong while stopping, for the log.
    public private(set) var lastStopProblem: String?
}

/// Lets the writer thread's deliveries find the backend; read and written on the loop only.
private final class LoopTarget: @unchecked Sendable {
    weak var backend: SQLiteStoreBackend?
}
