import PushEventLoop
import PushPostgres
import PushWire

/// Group commit on the write connection: while one transaction is in flight the writes
/// that arrive queue, and then go together as the next transaction, their STOREs as one
/// multi-row INSERT. An outcome is delivered only once the COMMIT has returned
/// (`synchronous_commit` on: durable).
///
/// Failures:
/// - A statement of the group fails (a deadlock with another store, a user removed under
///   a STORE): the transaction rolled back, so each operation is sent again alone, all
///   pipelined in one round trip, and only the one at fault fails.
/// - The connection is lost with the transaction in flight: whether it committed is
///   unknown, so every request of the group fails INTERNAL_ERROR (never STORE_OK), and the
///   operations are not sent again (a retried ACK would be harmless, a retried STORE would
///   not be).
///
/// Loop-confined.
final class PostgresGroupCommit {
    typealias Delivery = (_ tickets: [UInt64], _ outcomes: [WriteOutcome]?) -> Void

    private struct Pending {
        var operation: WriteOperation
        var ticket: UInt64
        /// A STORE whose recipient changed identity since its id was looked up goes round
        /// once more with the new id.
        var retried = false
    }

    private let link: PostgresLink
    private let loop: EventLoop
    private let sealer: PayloadSealer
    private let deliver: Delivery
    private var queue: [Pending] = []
    private(set) var inFlight = false
    private var startScheduled = false
    /// Recipients' internal ids by name, as last looked up. Never trusted alone: a row goes
    /// in only if the name still has that id when it commits.
    private var recipients: [ExactName: UInt64] = [:]
    static let recipientCapacity = 10_000
    /// The store loop that owns the pushes its SENDs commit (`PostgresWriteStatements.claimPushes`).
    var outboxOwner = ""
    /// How long a committed push is left to its owner before another store may claim it.
    var pushLeaseMs: UInt64 = 30_000
    /// Called whenever the queue has drained and nothing is in flight.
    var onIdle: (() -> Void)?
    /// Told why a group, or an operation of one, failed (for the log).
    var onError: ((_ error: PostgresError, _ operations: Int) -> Void)?
    /// Operations per transaction at most: bounded statements, and a bounded wait for the
    /// requests that come first.
    static let maxGroup = 8192

    init(link: PostgresLink, loop: EventLoop, sealer: PayloadSealer, deliver: @escaping Delivery) {
        self.link = link
        self.loop = loop
        self.sealer = sealer
        self.deliver = deliver
    }

    var isIdle: Bool { !inFlight && queue.isEmpty }

    /// The operations not sent yet, taken out of the queue (for a stop that commits them
    /// another way).
    func takeQueued() -> [(WriteOperation, UInt64)] {
        defer { queue = [] }
        return queue.map { ($0.operation, $0.ticket) }
    }

    func submit(_ operation: WriteOperation, ticket: UInt64) {
        queue.append(Pending(operation: operation, ticket: ticket))
        scheduleStart()
    }

    /// The group starts at the end of this loop iteration, so that the writes of one burst
    /// of input go together even when nothing is in flight.
    private func scheduleStart() {
        guard !inFlight, !startScheduled else { return }
        startScheduled = true
        loop.schedule(after: .zero) { [weak self] in
            guard let self else { return }
            startScheduled = false
            startGroup()
        }
    }

    private func startGroup() {
        guard !inFlight else { return }
        guard !queue.isEmpty else {
            onIdle?()
            return
        }
        let batch = Array(queue.prefix(PostgresGroupCommit.maxGroup))
        queue.removeFirst(batch.count)
        inFlight = true
        link.use { [weak self] connection, error in
            guard let self else { return }
            guard let connection else {
                finished(batch, outcomes: nil, because: error)
                return
            }
            resolveRecipients(batch, on: connection)
        }
    }

    // MARK: recipients

    /// Looks up the ids of recipients not known yet, in one query; a name with no user is
    /// UNKNOWN_USER without a transaction.
    private func resolveRecipients(_ batch: [Pending], on connection: PostgresConnection) {
        if recipients.count > PostgresGroupCommit.recipientCapacity { recipients.removeAll(keepingCapacity: true) }
        var unknown: [String] = []
        var seen = Set<ExactName>()
        for pending in batch {
            if case .store(let new) = pending.operation, recipients[ExactName(new.user)] == nil, seen.insert(ExactName(new.user)).inserted {
                unknown.append(new.user)
            }
        }
        guard !unknown.isEmpty else {
            commit(batch, on: connection)
            return
        }
        let placeholders = unknown.indices.map { "$\($0 + 1)" }.joined(separator: ", ")
        connection.query("SELECT name, id FROM users WHERE name IN (\(placeholders))", unknown.map { .text($0) }) { [weak self] result in
            guard let self else { return }
            switch result {
            case .success(let rows):
                var found: [ExactName: UInt64] = [:]
                for row in rows.rows.indices {
                    if let name = try? rows.text(row, 0), let id = try? rows.uint(row, 1) { found[ExactName(name)] = id }
                }
                recipients.merge(found) { $1 }
                commit(batch, on: connection)
            case .failure(let error):
                finished(batch, outcomes: error.kind == .connection ? nil : batch.map { _ in .failed(.internalError) }, because: error)
            }
        }
    }

    /// Commits `operations` over a blocking connection, without outcomes: for a stop that
    /// cannot wait for the loop.
    func commitBlocking(_ operations: [WriteOperation], on connection: PostgresBlockingConnection) throws {
        let unknown = Array(Set(operations.compactMap { operation -> ExactName? in
            guard case .store(let new) = operation, recipients[ExactName(new.user)] == nil else { return nil }
            return ExactName(new.user)
        })).map(\.text)
        if !unknown.isEmpty {
            let placeholders = unknown.indices.map { "$\($0 + 1)" }.joined(separator: ", ")
            let rows = try connection.query("SELECT name, id FROM users WHERE name IN (\(placeholders))", unknown.map { .text($0) })
            for row in rows.rows.indices { recipients[ExactName(try rows.text(row, 0))] = try rows.uint(row, 1) }
        }
        let plan = plan(operations.map { Pending(operation: $0, ticket: 0) })
        try connection.transaction {
            for statement in plan.statements { _ = try connection.query(statement.sql, statement.parameters) }
        }
    }

    // MARK: the transaction

    /// What one operation of a transaction became: its statements' indexes, and how to
    /// read its outcome from their results.
    private enum Planned {
        case decided(WriteOutcome)
        case stored(PayloadID)
        /// The ACK's row in the group's ACK statement, by ordinal (from 1).
        case ack(ordinal: Int, userID: UInt64)
        case recall(ordinal: Int)
        case done
    }

    private struct Plan {
        var statements: [PostgresStatement] = []
        var operations: [Planned] = []
        var insertStatements: [Int] = []
        /// The statements of all the group's ACKs and of all its RECALLs, over arrays.
        var ackStatement: Int?
        var recallStatement: Int?
    }

    /// `fixed` turns a statement of a fixed shape into what the transaction sends (marked
    /// to be prepared on the connection); by default, the statement itself.
    private func plan(_ batch: [Pending], fixed: (PostgresStatement) -> PostgresStatement = { $0 }) -> Plan {
        var plan = Plan()
        var rows: [PostgresWriteStatements.SealedPayload] = []
        var tallies: [FetchTally] = []
        for pending in batch {
            switch pending.operation {
            case .store(let new):
                guard let userID = recipients[ExactName(new.user)] else {
                    plan.operations.append(.decided(.failed(.unknownUser)))
                    continue
                }
                do {
                    let (keyID, sealed) = try sealer.seal(new.body, id: new.id, userID: userID)
                    rows.append(.init(payload: new, userID: userID, keyID: keyID, sealed: sealed))
                    plan.operations.append(.stored(new.id))
                } catch {
                    plan.operations.append(.decided(.failed(.internalError)))
                }
            case .ack, .recall:
                // Numbered below, once the INSERTs have their places.
                plan.operations.append(.done)
            case .recordFetches(let more):
                tallies += more
                plan.operations.append(.done)
            case .loginAttempt, .pushesHanded, .tokenFailures:
                plan.operations.append(.done)
            }
        }
        // The recipients' locks and the INSERTs first: a group that must wait for another
        // store's group of the same user, or for a removal, then waits before it has locked
        // any payload row.
        if let lock = PostgresWriteStatements.lockRecipients(Set(rows.map(\.userID))) { plan.statements.append(lock) }
        var start = 0
        while start < rows.count {
            let end = min(start + PostgresWriteStatements.rowsPerInsert, rows.count)
            plan.insertStatements.append(plan.statements.count)
            plan.statements.append(PostgresWriteStatements.insert(rows[start..<end]))
            start = end
        }
        // SENDs' pushes and keys, in the transaction of their payloads ([4.17-1]).
        let sends = rows.map(\.payload).filter { $0.push != nil }
        if let first = sends.first {
            plan.statements.append(fixed(PostgresWriteStatements.insertPushes(sends, owner: outboxOwner,
                                                                              leaseUntil: first.createdAt + pushLeaseMs)))
        }
        // Their audiences, when listed ([4.9-4]): a SEND to the whole user writes no row.
        let listed = sends.filter { !$0.audience.listedDevices.isEmpty }
        if !listed.isEmpty { plan.statements.append(fixed(PostgresWriteStatements.insertAudiences(listed))) }
        let keys = sends.compactMap(\.idempotency)
        if let now = sends.first?.createdAt, !keys.isEmpty {
            plan.statements.append(fixed(PostgresWriteStatements.freeExpiredKeys(keys, nowMs: now)))
            plan.statements.append(fixed(PostgresWriteStatements.insertKeys(keys)))
        }
        // All the ACKs as one statement, then all the RECALLs as one: operations of one
        // group were in flight together, so any order among them is one they could have had.
        var acks: [PostgresWriteStatements.Ack] = []
        var recalls: [UInt64] = []
        for (index, pending) in batch.enumerated() {
            switch pending.operation {
            case .ack(let sequence, let userID, let deviceID, let fetched):
                acks.append(.init(sequence: sequence, userID: userID, deviceID: deviceID))
                if let fetched { tallies.append(fetched) }
                plan.operations[index] = .ack(ordinal: acks.count, userID: userID)
            case .recall(let sequence):
                recalls.append(sequence)
                plan.operations[index] = .recall(ordinal: recalls.count)
            case .pushesHanded(let handed):
                plan.statements.append(fixed(PostgresWriteStatements.pushesHanded(handed)))
            // Written by compare-and-set outside the group (`PostgresLimitWriter`).
            case .store, .recordFetches, .loginAttempt, .tokenFailures:
                break
            }
        }
        if !acks.isEmpty {
            plan.ackStatement = plan.statements.count
            plan.statements.append(PostgresWriteStatements.acks(acks))
        }
        if !recalls.isEmpty {
            plan.recallStatement = plan.statements.count
            plan.statements.append(PostgresWriteStatements.recalls(recalls))
        }
        if !tallies.isEmpty { plan.statements += PostgresWriteStatements.recordFetches(tallies) }
        return plan
    }

    private func commit(_ batch: [Pending], on connection: PostgresConnection) {
        let plan = plan(batch, fixed: preparing(on: connection))
        guard !plan.statements.isEmpty else {
            finished(batch, outcomes: outcomes(plan, results: []), because: nil)
            return
        }
        connection.transaction(plan.statements) { [weak self] result in
            guard let self else { return }
            switch result {
            case .success(let results):
                finished(batch, outcomes: outcomes(plan, results: results), because: nil)
            case .failure(let error) where error.kind == .connection:
                finished(batch, outcomes: nil, because: error)
            case .failure(let error):
                if batch.count > 1 {
                    onError?(error, batch.count)
                    commitEachAlone(batch, on: connection)
                } else {
                    finished(batch, outcomes: [PostgresGroupCommit.outcome(of: error, for: batch[0].operation)], because: error)
                }
            }
        }
    }

    /// After a group failed on a statement: each operation as its own transaction, all sent
    /// at once (pipelined), so the failure stays with the operation that caused it.
    private func commitEachAlone(_ batch: [Pending], on connection: PostgresConnection) {
        var outcomes = [WriteOutcome?](repeating: nil, count: batch.count)
        var remaining = batch.count
        var lostConnection: PostgresError?
        for (index, pending) in batch.enumerated() {
            let plan = plan([pending], fixed: preparing(on: connection))
            let decide: (Result<[PostgresResult], PostgresError>) -> Void = { [weak self] result in
                guard let self else { return }
                switch result {
                case .success(let results): outcomes[index] = self.outcomes(plan, results: results).first ?? .ok
                case .failure(let error):
                    if error.kind == .connection {
                        lostConnection = error
                    } else {
                        onError?(error, 1)
                    }
                    outcomes[index] = PostgresGroupCommit.outcome(of: error, for: pending.operation)
                }
                remaining -= 1
                guard remaining == 0 else { return }
                // A lost connection leaves the rest unknown: none of them is told it succeeded.
                let all = outcomes.map { $0 ?? .failed(.internalError) }
                finished(batch, outcomes: lostConnection == nil ? all : nil, because: lostConnection)
            }
            if plan.statements.isEmpty {
                loop.schedule(after: .zero) { decide(.success([])) }
            } else {
                connection.transaction(plan.statements, completion: decide)
            }
        }
    }

    private func preparing(on connection: PostgresConnection) -> (PostgresStatement) -> PostgresStatement {
        { statement in PostgresStatement(statement.sql, statement.parameters, prepared: true) }
    }

    /// What an operation's own failure means for its request. A STORE whose recipient was
    /// removed as it committed fails its foreign key: UNKNOWN_USER, as if it had come after.
    private static func outcome(of error: PostgresError, for operation: WriteOperation) -> WriteOutcome {
        // Sealed under a data key pruned meanwhile: the store's next read of the keys has the
        // current one. Never under prune's rules, which wait until every store has moved on.
        if error.sqlState == "23503", error.message.contains(PostgresDataKeys.foreignKey) { return .failed(.internalError) }
        if case .store = operation, error.sqlState == "23503" { return .failed(.unknownUser) }
        // Another store committed a SEND with the same key meanwhile ([4.17-6]).
        if case .store(let new) = operation, new.idempotency != nil, error.sqlState == "23505" { return .failed(.busy) }
        return .failed(.internalError)
    }

    /// Outcomes by the plan, from the committed statements' results.
    private func outcomes(_ plan: Plan, results: [PostgresResult]) -> [WriteOutcome] {
        var stored: [PayloadID: UInt64] = [:]
        for index in plan.insertStatements where results.indices.contains(index) {
            let rows = results[index]
            for row in rows.rows.indices {
                if let id = try? rows.payloadID(row, 0), let seq = try? rows.uint(row, 1) { stored[id] = seq }
            }
        }
        // The ACKs' rows and the RECALLs found, by ordinal.
        let ackResult = plan.ackStatement.flatMap { results.indices.contains($0) ? results[$0] : nil }
        var ackRows: [Int: Int] = [:]
        if let rows = ackResult {
            for row in rows.rows.indices {
                if let ordinal = try? rows.int64(row, 0) { ackRows[Int(ordinal)] = row }
            }
        }
        var recalled = Set<Int>()
        if let index = plan.recallStatement, results.indices.contains(index) {
            let rows = results[index]
            for row in rows.rows.indices {
                if let ordinal = try? rows.int64(row, 0) { recalled.insert(Int(ordinal)) }
            }
        }
        return plan.operations.map { planned in
            switch planned {
            case .decided(let outcome): return outcome
            case .stored(let id):
                // No row: the recipient's name no longer has the id looked up.
                guard let seq = stored[id] else { return .failed(.unknownUser) }
                return .stored(sequence: seq)
            case .ack(let ordinal, let userID):
                guard let row = ackRows[ordinal] else { return .failed(.internalError) }
                guard let rows = ackResult, !rows.isNull(row, 1) else { return .failed(.notFound) }
                guard (try? rows.uint(row, 1)) == userID, (try? rows.bool(row, 3)) == true else { return .failed(.forbidden) }
                return .ok
            case .recall(let ordinal):
                guard plan.recallStatement.map(results.indices.contains) == true else { return .failed(.internalError) }
                return recalled.contains(ordinal) ? .ok : .failed(.notFound)
            case .done:
                return .ok
            }
        }
    }

    // MARK: delivery

    /// Delivers a group's outcomes (nil: unknown, the connection was lost), except STOREs
    /// whose recipient changed identity, which go round once more with the id looked up
    /// afresh; then starts the next group.
    private func finished(_ batch: [Pending], outcomes: [WriteOutcome]?, because error: PostgresError?) {
        inFlight = false
        if let error { onError?(error, batch.count) }
        var tickets: [UInt64] = []
        var delivered: [WriteOutcome] = []
        var again: [Pending] = []
        for (index, pending) in batch.enumerated() {
            if let outcomes, case .failed(.unknownUser) = outcomes[index], case .store(let new) = pending.operation,
               !pending.retried, recipients[ExactName(new.user)] != nil {
                recipients[ExactName(new.user)] = nil
                var retry = pending
                retry.retried = true
                again.append(retry)
                continue
            }
            tickets.append(pending.ticket)
            if let outcomes { delivered.append(outcomes[index]) }
        }
        queue.insert(contentsOf: again, at: 0)
        if !tickets.isEmpty { deliver(tickets, outcomes == nil ? nil : delivered) }
        if queue.isEmpty {
            onIdle?()
        } else {
            scheduleStart()
        }
    }
}
