import Logging
import PushClock
import PushEventLoop
import PushPostgres
import PushSecurity
import PushSession
import PushStoreLogic
import PushWire

/// The shared backend: any number of stores over one PostgreSQL database, each with its
/// own connections on its own loop (libpq in pipeline mode, no threads). Reads go out as
/// one statement per request on a read connection; writes are group-committed on a write
/// connection (`PostgresGroupCommit`). Nothing is cached between requests, so what one
/// store or command commits, every store sees on its next request; the login limits live
/// in the database too (`sharesLoginLimits`). The data keys are read again every second
/// (`PostgresStoreKeys`).
public final class PostgresStoreBackend: StoreBackend {
    /// Why the backend did not start. No case carries the URL's password.
    public enum StartFailure: Error, CustomStringConvertible {
        case invalidURL(PostgresError)
        case cannotConnect(database: String, PostgresError)
        case schema(database: String, PostgresSchemaError)
        case dataKeys(path: String, String)

        public var description: String {
            switch self {
            case .invalidURL(let error): "invalid database URL: \(error.message)"
            case .cannotConnect(let database, let error): "cannot connect to \(database): \(error)"
            case .schema(let database, let error): "\(database): \(error)"
            case .dataKeys(let path, let text): "cannot read the data keys \(path): \(text)"
            }
        }
    }

    /// Read connections per store: requests pipeline on each, so one keeps the server busy;
    /// a second measured no faster on this 2-core machine (the server's processes and the
    /// store share the cores).
    static let readConnections = 1

    public let location: String
    public let registrySequenceAtStart: UInt64
    public var onCommitted: ((_ tickets: [UInt64], _ outcomes: [WriteOutcome]?) -> Void)?
    public var sharesLoginLimits: Bool { true }
    public var kind: String { "postgresql" }

    private let loop: EventLoop
    private let url: String
    private let settings: StoreSettings
    private let clock: @Sendable () -> UInt64
    private let logger: Logger
    private let sealer: PayloadSealer
    private let readLinks: [PostgresLink]
    private let writeLink: PostgresLink
    private var committer: PostgresGroupCommit!
    /// The login limits and refused tokens every store shares, decided by the rules and
    /// written by compare-and-set.
    private var limitWriter: PostgresLimitWriter!
    private var reads: PostgresReadBatch!
    private var sweepTimer: LoopTimer?
    private var sweeping = false
    private var stopped = false
    private var finishing: [() -> Void] = []
    private var finishTimer: LoopTimer?
    /// The data keys as last read from the database, and what opens them.
    private var keys: PostgresStoreKeys?

    /// Validates the URL, checks the schema (applying migrations) over a blocking
    /// connection, then opens the loop's connections; requests that come before they are
    /// up wait for them. pg_stat_activity names each connection by its store loop
    /// (`loopIndex`) and its job: `securepush store loop 0 write`, `... read 1`.
    public static func start(url: String, settings: StoreSettings, dataKeysPath: String, clock: @escaping @Sendable () -> UInt64,
                             logger: Logger, loopIndex: Int = 0, outboxOwner: String = "", on loop: EventLoop)
        throws(StartFailure) -> PostgresStoreBackend {
        do {
            try PostgresURL.validate(url)
        } catch {
            throw .invalidURL(error)
        }
        let database = PostgresURL.redacted(url)
        let registrySequence: UInt64
        let keys: PostgresStoreKeys
        do {
            let connection = try PostgresBlockingConnection(url)
            defer { connection.close() }
            do {
                try PostgresSchema.prepare(connection)
            } catch {
                throw StartFailure.schema(database: database, error)
            }
            registrySequence = try PostgresRegistryTable.lastChange(on: connection)
            do {
                keys = try PostgresStoreKeys(path: dataKeysPath, on: connection)
            } catch {
                throw StartFailure.dataKeys(path: dataKeysPath, "\(error)")
            }
        } catch let failure as StartFailure {
            throw failure
        } catch let error as PostgresError {
            throw .cannotConnect(database: database, error)
        } catch {
            throw .cannotConnect(database: database, PostgresError(kind: .connection, message: "\(error)"))
        }
        let backend = PostgresStoreBackend(url: url, database: database, registrySequence: registrySequence, settings: settings,
                                           sealer: PayloadSealer(ring: keys.ring), clock: clock, logger: logger, loopIndex: loopIndex, loop: loop)
        backend.keys = keys
        let resealer = PostgresResealer(link: backend.writeLink, loop: loop, sealer: backend.sealer)
        resealer.onError = { error in logger.warning("re-sealing payloads failed", metadata: ["error": "\(error)"]) }
        keys.follow(on: loop, readLink: { [weak backend] in backend?.readLink() ?? resealer.link }, resealer: resealer, logger: logger)
        backend.committer.outboxOwner = outboxOwner
        backend.committer.pushLeaseMs = settings.outboxLeaseMs
        return backend
    }

    private init(url: String, database: String, registrySequence: UInt64, settings: StoreSettings, sealer: PayloadSealer,
                 clock: @escaping @Sendable () -> UInt64, logger: Logger, loopIndex: Int, loop: EventLoop) {
        self.url = url
        location = database
        registrySequenceAtStart = registrySequence
        self.settings = settings
        self.sealer = sealer
        self.clock = clock
        self.logger = logger
        self.loop = loop
        func link(_ name: String) -> PostgresLink {
            PostgresLink(name: name, url: url, applicationName: "securepush store loop \(loopIndex) \(name)", loop: loop)
        }
        readLinks = (0..<PostgresStoreBackend.readConnections).map { link("read \($0 + 1)") }
        writeLink = link("write")
        committer = PostgresGroupCommit(link: writeLink, loop: loop, sealer: sealer) {
            [weak self] tickets, outcomes in
            if outcomes != nil { self?.writesWorkSinceMs = Clocks.monotonicMilliseconds() }
            self?.onCommitted?(tickets, outcomes)
        }
        reads = PostgresReadBatch(loop: loop, open: { sealed, keyID, id, userID in
            try sealer.open(sealed, keyID: keyID, id: id, userID: userID)
        }, send: { [weak self] statement, done in
            guard let self else {
                done(.failure(PostgresError(kind: .connection, message: "the store is stopping")))
                return
            }
            readLink().use { connection, error in
                guard let connection else {
                    done(.failure(error ?? PostgresError(kind: .connection, message: "no database connection")))
                    return
                }
                connection.query(statement, completion: done)
            }
        })
        committer.onIdle = { [weak self] in self?.finishIfIdle() }
        limitWriter = PostgresLimitWriter(link: writeLink, limits: LoginThrottle.Settings(settings), tokenWindowMs: settings.badTokenWindowMs,
                                          clock: clock)
        limitWriter.onIdle = { [weak self] in self?.finishIfIdle() }
        limitWriter.onError = { [weak self] problem in
            // Writes cut short by a stop are not news.
            guard let self, !stopped else { return }
            logger.warning("database write failed", metadata: ["error": "\(problem)"])
        }
        committer.onError = { [weak self] error, operations in
            self?.logger.warning("database write failed", metadata: ["operations": "\(operations)", "error": "\(error)"])
        }
        watchConnections()
        sweepTimer = loop.schedule(after: .milliseconds(Int(clamping: settings.sweepIntervalMs)), repeating: true) { [weak self] in
            self?.sweep()
        }
    }

    deinit { stopLinks() }

    /// Each connection's loss and return logged; the write connection's return also ends
    /// a failure of writes.
    private func watchConnections() {
        for link in readLinks + [writeLink] {
            link.onDown = { [weak self, unowned link] error in
                self?.logger.error("database connection lost", metadata: ["connection": "\(link.name)", "error": "\(error)"])
            }
            link.onUp = { [weak self, unowned link] again in
                guard again else { return }
                self?.logger.info("database connection restored", metadata: ["connection": "\(link.name)"])
            }
        }
        // A group that failed because the connection was lost is over once it is back.
        let previous = writeLink.onUp
        writeLink.onUp = { [weak self] again in
            self?.writesWorkSinceMs = Clocks.monotonicMilliseconds()
            previous?(again)
        }
    }

    /// When writes were last seen to work (monotonic ms): a group committed, or the write
    /// connection came back after a loss. A commit failure before it is over.
    public private(set) var writesWorkSinceMs: Int64?

    /// Why the store cannot serve right now (a connection down or still connecting), for
    /// readiness; nil when every connection is up.
    public var problem: String? {
        for link in [writeLink] + readLinks {
            if let problem = link.problem { return "\(link.name) connection: \(problem)" }
        }
        return keys?.problem
    }

    // MARK: reads

    public func read(_ reads: StoreReads, completion: @escaping (Result<StoreReadResult, StoreBackendError>) -> Void) {
        if PostgresReadStatement.batches(reads) {
            self.reads.read(reads, completion: completion)
            return
        }
        let statement = PostgresReadStatement(reads)
        guard let query = reads.registry else {
            guard let statement else {
                loop.schedule(after: .zero) { completion(.success(StoreReadResult())) }
                return
            }
            readRow(statement, reads: reads, completion: completion)
            return
        }
        // REGISTRY's page is rows of its own; the rest of the reads (never asked together
        // with it by today's requests) follow it on the same connection.
        let page = PostgresReadStatement.registryPage(query)
        onReadConnection(completion) { run in
            run(page.sql, page.parameters) { [weak self] result in
                guard let self else { return }
                let decoded: Result<RegistryPage, StoreBackendError> = result.mapError { StoreBackendError($0) }.flatMap { rows in
                    Result { () throws(PostgresError) in try PostgresReadStatement.decodeRegistryPage(rows, query: query) }
                        .mapError { StoreBackendError($0) }
                }
                switch decoded {
                case .failure(let error): completion(.failure(error))
                case .success(let registry):
                    guard let statement else {
                        completion(.success(StoreReadResult(registry: registry)))
                        return
                    }
                    readRow(statement, reads: reads) { rest in completion(rest.map { var all = $0; all.registry = registry; return all }) }
                }
            }
        }
    }

    private func readRow(_ statement: PostgresReadStatement, reads: StoreReads,
                         completion: @escaping (Result<StoreReadResult, StoreBackendError>) -> Void) {
        onReadConnection(completion) { [sealer] run in
            run(statement.sql, statement.parameters) { result in
                switch result {
                case .failure(let error): completion(.failure(StoreBackendError(error)))
                case .success(let rows):
                    do {
                        completion(.success(try statement.decode(rows, reads: reads) { sealed, keyID, id, userID in
                            try sealer.open(sealed, keyID: keyID, id: id, userID: userID)
                        }))
                    } catch {
                        completion(.failure(StoreBackendError(error)))
                    }
                }
            }
        }
    }

    typealias Completion = (Result<PostgresResult, PostgresError>) -> Void
    /// Runs one read statement, prepared, on the connection `onReadConnection` chose.
    typealias ReadRunner = (_ sql: String, _ parameters: [PostgresValue], _ completion: @escaping Completion) -> Void

    /// The read connection with the fewest requests outstanding, or the first if none is up.
    private func readLink() -> PostgresLink {
        readLinks.min { ($0.connection?.pendingCount ?? .max) < ($1.connection?.pendingCount ?? .max) } ?? writeLink
    }

    /// Runs `body` with a runner of read statements on the connection `readLink` chose.
    private func onReadConnection<T>(_ completion: @escaping (Result<T, StoreBackendError>) -> Void,
                                     _ body: @escaping (ReadRunner) -> Void) {
        readLink().use { connection, error in
            guard let connection else {
                completion(.failure(StoreBackendError(error.map { "\($0)" } ?? "no database connection")))
                return
            }
            body { sql, parameters, done in
                connection.query(PostgresStatement(sql, parameters, prepared: true), completion: done)
            }
        }
    }

    /// Claims, for this store loop, the waiting pushes after `cursor` that it owns or whose
    /// lease is over (`PostgresWriteStatements.claimPushes`): what it left before a restart,
    /// and what a store that died or cannot reach a gateway left behind ([4.17-4]).
    public func waitingPushes(after cursor: UInt64, limit: Int,
                              completion: @escaping (Result<[OutboxEntry], StoreBackendError>) -> Void) {
        let now = clock()
        let claim = PostgresWriteStatements.claimPushes(owner: committer.outboxOwner, after: cursor, limit: limit, nowMs: now,
                                                        leaseUntil: now + settings.outboxLeaseMs)
        onReadConnection(completion) { run in
            run(claim.sql, claim.parameters) { result in
                completion(result.mapError { StoreBackendError($0) }.flatMap { rows in
                    Result { () throws(PostgresError) -> [OutboxEntry] in
                        var entries: [OutboxEntry] = []
                        for row in rows.rows.indices {
                            // A row that does not decode was not written by a store: skipped.
                            guard let push = OutboxEntry.decode(try rows.bytes(row, 1)) else { continue }
                            entries.append(OutboxEntry(sequence: try rows.uint(row, 0), push: push, expiresAt: try rows.uint(row, 2),
                                                       createdAt: try rows.uint(row, 3)))
                        }
                        return entries
                    }.mapError { StoreBackendError($0) }
                })
            }
        }
    }

    public func limitedTokenAddresses(limit: Int, windowMs: UInt64, nowMs: UInt64,
                                      completion: @escaping (Result<[LimitedAddress], StoreBackendError>) -> Void) {
        onReadConnection(completion) { run in
            run("SELECT address, window_start FROM token_failures WHERE failures >= $1 AND window_start >= $2",
                [.int64(Int64(limit)), .uint(FailureWindow.earliestOpenStart(nowMs: nowMs, windowMs: windowMs))]) { result in
                completion(result.mapError { StoreBackendError($0) }.flatMap { rows in
                    Result { () throws(PostgresError) -> [LimitedAddress] in
                        try rows.rows.indices.map { (row) throws(PostgresError) in
                            LimitedAddress(address: try rows.text(row, 0), windowStart: try rows.uint(row, 1))
                        }
                    }.mapError { StoreBackendError($0) }
                })
            }
        }
    }

    /// Asked every 200 ms: while the database is unreachable it answers "no news" rather
    /// than an error a line of the log each time (the lost connection is logged once, and
    /// readiness says so).
    public func registryNotice(after cursor: UInt64, completion: @escaping (Result<RegistryNotice?, StoreBackendError>) -> Void) {
        let notice = PostgresReadStatement.registryNotice(after: cursor)
        onReadConnection({ (result: Result<RegistryNotice?, StoreBackendError>) in
            completion(result.flatMapError { _ in .success(nil) })
        }) { run in
            run(notice.sql, notice.parameters) { result in
                if case .failure(let error) = result, error.kind == .connection {
                    completion(.success(nil))
                    return
                }
                completion(result.mapError { StoreBackendError($0) }.flatMap { rows in
                    Result { () throws(PostgresError) -> RegistryNotice? in
                        let current = try rows.uint(0, 0)
                        guard current != cursor else { return nil }
                        return RegistryNotice(from: cursor, to: current,
                                              counts: RegistryChangeCounts(enrolled: Int(try rows.uint(0, 1)), revoked: Int(try rows.uint(0, 2))))
                    }.mapError { StoreBackendError($0) }
                })
            }
        }
    }

    // MARK: writes

    public func submit(_ operation: WriteOperation, ticket: UInt64) {
        guard !stopped else {
            if ticket != 0 { loop.schedule(after: .zero) { [weak self] in self?.onCommitted?([ticket], [.failed(.internalError)]) } }
            return
        }
        switch operation {
        // Nothing waits for these (ticket 0): they are decided against what the database
        // holds now, and written by compare-and-set, outside the group.
        case .loginAttempt(let change): limitWriter.write(change)
        case .tokenFailures(let windows): limitWriter.write(windows)
        default: committer.submit(operation, ticket: ticket)
        }
    }

    /// Nothing to remember: every store finds a payload by its ID in the database.
    public func stored(_ id: PayloadID, sequence: UInt64, sealed: Bool) {}

    // MARK: the sweep

    /// Empties expired payloads, forgets long-dead ones, prunes expired revoked
    /// registrations and idle login limits, a batch at a time; safe while other stores
    /// sweep too. Failures are tried again at the next sweep.
    private func sweep() {
        guard !sweeping, !stopped else { return }
        sweeping = true
        let now = clock()
        let horizon = now > PayloadLife.tombstoneRetentionMs ? now - PayloadLife.tombstoneRetentionMs : 0
        // At most 20 batches of expiring rows per sweep; the rest wait for the next.
        var statements = (0..<20).map { _ in SweepStep(statement: PostgresWriteStatements.expire(nowMs: now), expires: true) }
        statements.append(SweepStep(statement: PostgresWriteStatements.forget(horizonMs: horizon), expires: false))
        statements += PostgresWriteStatements.pruneOthers(nowMs: now, tokenWindowMs: settings.badTokenWindowMs).map {
            SweepStep(statement: $0, expires: false)
        }
        writeLink.use { [weak self] connection, _ in
            guard let self else { return }
            guard let connection else {
                sweeping = false
                return
            }
            limitWriter.pruneBudgets(nowMs: now)
            runSweep(statements[...], on: connection, emptied: 0)
        }
    }

    /// One statement at a time, each its own transaction; the expiring ones stop once a
    /// batch comes back short.
    private struct SweepStep {
        var statement: PostgresStatement
        /// Empties expired payloads; the rest of these are skipped once one comes back short.
        var expires: Bool
    }

    private func runSweep(_ statements: ArraySlice<SweepStep>, on connection: PostgresConnection, emptied: Int) {
        guard let step = statements.first, !stopped else {
            sweeping = false
            if emptied > 0 { logger.debug("swept expired payloads", metadata: ["emptied": "\(emptied)"]) }
            return
        }
        connection.query(step.statement.sql, step.statement.parameters) { [weak self] result in
            guard let self else { return }
            switch result {
            case .failure(let error):
                sweeping = false
                logger.warning("sweep failed", metadata: ["error": "\(error)"])
            case .success(let rows):
                var rest = statements.dropFirst()
                if step.expires && rows.affectedRows < PostgresWriteStatements.sweepBatch { rest = rest.drop { $0.expires } }
                runSweep(rest, on: connection, emptied: emptied + (step.expires ? rows.affectedRows : 0))
            }
        }
    }

    // MARK: stopping

    /// Waits (on the loop) until every queued write is committed, at most `timeoutMs`,
    /// then closes the connections and runs `done`: a graceful stop.
    public func finish(then done: @escaping () -> Void) { finish(timeoutMs: 5_000, then: done) }

    /// `finish`, giving up on what is still queued after `timeoutMs`.
    public func finish(timeoutMs: Int, then done: @escaping () -> Void) {
        guard !stopped else {
            done()
            return
        }
        finishing.append(done)
        if finishTimer == nil {
            finishTimer = loop.schedule(after: .milliseconds(timeoutMs)) { [weak self] in
                self?.logger.warning("stopping with writes still uncommitted")
                self?.completeFinish()
            }
        }
        finishIfIdle()
    }

    private func finishIfIdle() {
        guard !finishing.isEmpty, committer.isIdle, limitWriter.isIdle else { return }
        completeFinish()
    }

    private func completeFinish() {
        finishTimer?.cancel()
        finishTimer = nil
        stop()
        let all = finishing
        finishing = []
        for done in all { done() }
    }

    /// Stops at once. Writes still queued are committed over a blocking connection before
    /// it returns (their requests' connections are closing: no reply follows); a
    /// transaction already in flight was sent whole and its COMMIT with it, which the
    /// server carries out although the connection closes. Idempotent.
    public func stop() {
        guard !stopped else { return }
        stopped = true
        sweepTimer?.cancel()
        sweepTimer = nil
        keys?.stop()
        let queued = committer.takeQueued()
        if !queued.isEmpty {
            do {
                let connection = try PostgresBlockingConnection(url)
                defer { connection.close() }
                try committer.commitBlocking(queued.map(\.0), on: connection)
            } catch {
                lastStopProblem = "\(queued.count) writes not committed at stop: \(error)"
            }
        }
        stopLinks()
    }

    private func stopLinks() {
        for link in readLinks + [writeLink] { link.stop() }
    }

    /// What went wrong while stopping, for the log.
    public private(set) var lastStopProblem: String?
}
