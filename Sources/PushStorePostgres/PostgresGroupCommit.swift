import PushEventLoop
import PushPostgres
import PushStoreLogic
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
        /// Times an ACK's receipt found its payload changed since the row it was decided
        /// from was read, and went round again with the row read afresh.
        var receiptRounds = 0
    }

    /// Rounds an ACK's receipt may take before it fails INTERNAL_ERROR (the device ACKs
    /// again): each round another store's receipt of the same payload went first.
    static let maxReceiptRounds = 16

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
            resolveReceiptRows(batch, on: connection)
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
                resolveReceiptRows(batch, on: connection)
            case .failure(let error):
                finished(batch, outcomes: error.kind == .connection ? nil : batch.map { _ in .failed(.internalError) }, because: error)
            }
        }
    }

    /// The ACKs whose payload row is not known (their receipt went round again, or the
    /// request's read did not carry it), by index in `batch`.
    private static func acksWithoutRow(_ batch: [Pending]) -> [Int] {
        batch.indices.filter { index in
            if case .ack(_, _, _, _, nil) = batch[index].operation { return true }
            return false
        }
    }

    /// The ACKs' rows given to `batch`: a payload gone meanwhile leaves its ACK NOT_FOUND.
    private static func giving(_ rows: [Int: ReceiptRow?], to batch: [Pending], at indexes: [Int]) -> [Pending] {
        var batch = batch
        for (ordinal, index) in indexes.enumerated() {
            guard case .ack(let sequence, let userID, let deviceID, let fetched, _) = batch[index].operation else { continue }
            let row = rows[ordinal + 1] ?? nil
            batch[index].operation = .ack(sequence: sequence, userID: userID, deviceID: deviceID, fetched: fetched,
                                          row: row ?? PostgresGroupCommit.goneRow)
        }
        return batch
    }

    /// Stands for a payload no longer there: owned by no user (ids are never 0), so its
    /// receipt is refused; `outcomes` answers NOT_FOUND for it.
    static let goneRow = ReceiptRow(owner: 0, admitsDevice: false, life: .expired, readLimit: 0, readCount: 0, acknowledged: true)

    /// Reads afresh, in one query, the rows of the ACKs that have none, then commits.
    private func resolveReceiptRows(_ batch: [Pending], on connection: PostgresConnection) {
        let indexes = PostgresGroupCommit.acksWithoutRow(batch)
        guard !indexes.isEmpty else {
            commit(batch, on: connection)
            return
        }
        let statement = PostgresWriteStatements.receiptRows(PostgresGroupCommit.receiptKeys(batch, indexes))
        connection.query(statement.sql, statement.parameters) { [weak self] result in
            guard let self else { return }
            switch result {
            case .success(let found):
                do throws(PostgresError) {
                    let rows = try PostgresWriteStatements.decodeReceiptRows(found)
                    commit(PostgresGroupCommit.giving(rows, to: batch, at: indexes), on: connection)
                } catch {
                    finished(batch, outcomes: batch.map { _ in .failed(.internalError) }, because: error)
                }
            case .failure(let error):
                finished(batch, outcomes: error.kind == .connection ? nil : batch.map { _ in .failed(.internalError) }, because: error)
            }
        }
    }

    private static func receiptKeys(_ batch: [Pending], _ indexes: [Int]) -> [(sequence: UInt64, deviceID: String)] {
        indexes.compactMap { index in
            guard case .ack(let sequence, _, let deviceID, _, _) = batch[index].operation else { return nil }
            return (sequence, deviceID)
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
        var batch = operations.map { Pending(operation: $0, ticket: 0) }
        let indexes = PostgresGroupCommit.acksWithoutRow(batch)
        if !indexes.isEmpty {
            let statement = PostgresWriteStatements.receiptRows(PostgresGroupCommit.receiptKeys(batch, indexes))
            let rows = try PostgresWriteStatements.decodeReceiptRows(try connection.query(statement.sql, statement.parameters))
            batch = PostgresGroupCommit.giving(rows, to: batch, at: indexes)
        }
        // A receipt whose payload another store changed meanwhile is not written: the
        // device, told nothing, acknowledges it again.
        let plan = plan(batch)
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
        /// A device key set if its statement (at this index) returned a row.
        case deviceKey(statement: Int)
        /// A receipt written if its payload's seq comes back from the group's receipts
        /// statement; otherwise its payload changed meanwhile, and it is decided again.
        case receipt(sequence: UInt64)
        case recall(ordinal: Int)
        case done
    }

    private struct Plan {
        var statements: [PostgresStatement] = []
        var operations: [Planned] = []
        var insertStatements: [Int] = []
        /// The statements of all the group's receipts and of all its RECALLs, over arrays.
        var receiptStatement: Int?
        var recallStatement: Int?
    }

    /// `fixed` turns a statement of a fixed shape into what the transaction sends (marked
    /// to be prepared on the connection); by default, the statement itself.
    private func plan(_ batch: [Pending], fixed: (PostgresStatement) -> PostgresStatement = { $0 }) -> Plan {
        var plan = Plan()
        var tallies: [FetchTally] = []
        let rows = sealStores(batch, into: &plan, tallies: &tallies)
        planDeviceKeys(batch, into: &plan, fixed: fixed)
        planInserts(of: rows, into: &plan, fixed: fixed)
        planReceiptsAndRecalls(batch, into: &plan, tallies: &tallies, fixed: fixed)
        if !tallies.isEmpty { plan.statements += PostgresWriteStatements.recordFetches(tallies) }
        return plan
    }

    /// Each STORE's payload sealed for its recipient, one operation planned per pending one;
    /// the ACKs and RECALLs are numbered later (`planReceiptsAndRecalls`).
    private func sealStores(_ batch: [Pending], into plan: inout Plan, tallies: inout [FetchTally]) -> [PostgresWriteStatements.SealedPayload] {
        var rows: [PostgresWriteStatements.SealedPayload] = []
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
            case .loginAttempt, .pushesHanded, .tokenFailures, .deviceKey:
                plan.operations.append(.done)
            }
        }
        return rows
    }

    /// LOGINs' device keys, first in the transaction: the registry's counter is locked before
    /// any user row, in the order `securepush user remove` and `device revoke` take them.
    private func planDeviceKeys(_ batch: [Pending], into plan: inout Plan, fixed: (PostgresStatement) -> PostgresStatement) {
        var locked = false
        for (index, pending) in batch.enumerated() {
            guard case .deviceKey(let change) = pending.operation else { continue }
            if !locked {
                plan.statements.append(fixed(PostgresWriteStatements.lockRegistryChanges))
                locked = true
            }
            plan.operations[index] = .deviceKey(statement: plan.statements.count)
            plan.statements.append(fixed(PostgresWriteStatements.setDeviceKey(change)))
        }
    }

    /// The sealed payloads' rows and audiences, and what must precede them.
    private func planInserts(of rows: [PostgresWriteStatements.SealedPayload], into plan: inout Plan,
                             fixed: (PostgresStatement) -> PostgresStatement) {
        // The recipients' locks and the INSERTs first: a group that must wait for another
        // store's group of the same user, or for a removal, then waits before it has locked
        // any payload row.
        if let lock = PostgresWriteStatements.lockRecipients(Set(rows.map(\.userID))) { plan.statements.append(lock) }
        // Keys whose earlier use was forgotten are freed before the rows that take them go in.
        let taken = rows.compactMap { row in
            row.payload.idempotency.flatMap { record in row.payload.keyTakenFromExpiry.map { (record.key, $0) } }
        }
        if !taken.isEmpty { plan.statements.append(fixed(PostgresWriteStatements.freeForgottenKeys(taken))) }
        // A SEND's payload, push and key are one row ([4.17-1]); its lease starts with it.
        let leaseUntil = (rows.first?.payload.createdAt ?? 0) + pushLeaseMs
        var start = 0
        while start < rows.count {
            let end = min(start + PostgresWriteStatements.rowsPerInsert, rows.count)
            plan.insertStatements.append(plan.statements.count)
            plan.statements.append(PostgresWriteStatements.insert(rows[start..<end], owner: outboxOwner, leaseUntil: leaseUntil))
            start = end
        }
        // Their audiences, when listed ([4.9-4]): a SEND to the whole user writes no row.
        let listed = rows.map(\.payload).filter { !$0.audience.listedDevices.isEmpty }
        if !listed.isEmpty { plan.statements.append(fixed(PostgresWriteStatements.insertAudiences(listed))) }
    }

    /// The group's receipts, decided, and its RECALLs, each kind as one statement; the
    /// gateways' answers to pushes.
    private func planReceiptsAndRecalls(_ batch: [Pending], into plan: inout Plan, tallies: inout [FetchTally],
                                        fixed: (PostgresStatement) -> PostgresStatement) {
        // All the receipts as one statement, then all the RECALLs as one: operations of one
        // group were in flight together, so any order among them is one they could have had.
        // Receipts of one payload are decided one after another, from the row the first
        // was read with.
        var acks: [PostgresGroupCommit.Receipt] = []
        var ackIndexes: [Int] = []
        var recalls: [UInt64] = []
        for (index, pending) in batch.enumerated() {
            switch pending.operation {
            case .ack(let sequence, let userID, let deviceID, let fetched, let row):
                if let fetched { tallies.append(fetched) }
                guard let row else {
                    plan.operations[index] = .decided(.failed(.internalError))
                    continue
                }
                guard row != PostgresGroupCommit.goneRow else {
                    plan.operations[index] = .decided(.failed(.notFound))
                    continue
                }
                acks.append(.init(sequence: sequence, userID: userID, deviceID: deviceID, row: row))
                ackIndexes.append(index)
            case .recall(let sequence):
                recalls.append(sequence)
                plan.operations[index] = .recall(ordinal: recalls.count)
            case .pushesHanded(let handed):
                plan.statements.append(fixed(PostgresWriteStatements.pushesHanded(handed)))
            // Written by compare-and-set outside the group (`PostgresLimitWriter`); keys planned first.
            case .store, .recordFetches, .loginAttempt, .tokenFailures, .deviceKey:
                break
            }
        }
        let receipts = PostgresGroupCommit.decideReceipts(acks)
        for (index, decided) in zip(ackIndexes, receipts.decisions) {
            switch decided.write {
            case .refused(let status): plan.operations[index] = .decided(.failed(status))
            case .unchanged: plan.operations[index] = .decided(.ok)
            case .counted, .readOut: plan.operations[index] = .receipt(sequence: decided.sequence)
            }
        }
        if !receipts.writes.isEmpty {
            plan.receiptStatement = plan.statements.count
            plan.statements.append(PostgresWriteStatements.receipts(receipts.writes))
        }
        if !recalls.isEmpty {
            plan.recallStatement = plan.statements.count
            plan.statements.append(PostgresWriteStatements.recalls(recalls))
        }
    }

    /// An ACK as a group decides its receipt.
    struct Receipt {
        var sequence: UInt64
        var userID: UInt64
        var deviceID: String
        /// The payload's row as the request read it.
        var row: ReceiptRow
    }

    private struct PayloadDevice: Hashable {
        var sequence: UInt64
        var device: ExactName
    }

    /// A group's receipts decided with `PayloadLife.receipt`, those of one payload one after
    /// another from the row the first was read with (a row that changed meanwhile fails the
    /// statement's check and is decided again): each ACK's decision, and the writes per payload.
    static func decideReceipts(_ acks: [Receipt]) -> (decisions: [(sequence: UInt64, write: ReceiptWrite)],
                                                     writes: [PostgresWriteStatements.ReceiptWrites]) {
        var writes: [UInt64: PostgresWriteStatements.ReceiptWrites] = [:]
        var rows: [UInt64: ReceiptRow] = [:]
        // Whether a device acknowledged is its own: known from its read, or from this group.
        var acknowledged = Set<PayloadDevice>()
        var decisions: [(sequence: UInt64, write: ReceiptWrite)] = []
        for ack in acks {
            let device = PayloadDevice(sequence: ack.sequence, device: ExactName(ack.deviceID))
            var row = rows[ack.sequence] ?? ack.row
            row.acknowledged = ack.row.acknowledged || acknowledged.contains(device)
            let write = PayloadLife.receipt(on: row, from: ack.userID)
            rows[ack.sequence] = row.after(write)
            if case .counted = write { acknowledged.insert(device) }
            decisions.append((ack.sequence, write))
            switch write {
            case .refused, .unchanged: break
            case .counted(let count), .readOut(let count):
                var payload = writes[ack.sequence]
                    ?? .init(sequence: ack.sequence, readCountBefore: row.readCount, readCount: count, readsOut: false, devices: [])
                payload.readCount = count
                if case .readOut = write { payload.readsOut = true } else { payload.devices.append(ack.deviceID) }
                writes[ack.sequence] = payload
            }
        }
        return (decisions, Array(writes.values))
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
                case .success(let results):
                    // A receipt whose payload changed meanwhile: decided again in the next group.
                    outcomes[index] = self.outcomes(plan, results: results).first ?? .ok
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
                finished(batch, outcomes: lostConnection == nil ? outcomes : nil, because: lostConnection)
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
        // A sealed payload's id is its sender's to derive: one the store knows is CONFLICT ([4.19-2]).
        if case .store(let new) = operation, new.sealed, error.sqlState == "23505", error.message.contains("payloads_id_key") {
            return .failed(.conflict)
        }
        // Another store committed a SEND with the same key meanwhile ([4.17-6]).
        if case .store(let new) = operation, new.idempotency != nil, error.sqlState == "23505" { return .failed(.busy) }
        return .failed(.internalError)
    }

    /// Outcomes by the plan, from the committed statements' results; nil for a receipt
    /// whose payload another store changed after the row it was decided from was read: it
    /// is not delivered, the ACK goes round again (`finished`).
    private func outcomes(_ plan: Plan, results: [PostgresResult]) -> [WriteOutcome?] {
        var stored: [PayloadID: (sequence: UInt64, keyCursor: UInt64?)] = [:]
        for index in plan.insertStatements where results.indices.contains(index) {
            let rows = results[index]
            for row in rows.rows.indices {
                if let id = try? rows.payloadID(row, 0), let seq = try? rows.uint(row, 1) {
                    stored[id] = (seq, rows.isNull(row, 2) ? nil : try? rows.uint(row, 2))
                }
            }
        }
        // The payloads whose receipts were written, and the RECALLs found, by ordinal.
        var written = Set<UInt64>()
        if let index = plan.receiptStatement, results.indices.contains(index) {
            let rows = results[index]
            for row in rows.rows.indices {
                if let seq = try? rows.uint(row, 0) { written.insert(seq) }
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
                guard let row = stored[id] else { return .failed(.unknownUser) }
                return .stored(sequence: row.sequence, keyCursor: row.keyCursor)
            case .deviceKey(let index):
                guard results.indices.contains(index) else { return .failed(.internalError) }
                // No row: the registration was revoked, or enrolled again, meanwhile.
                return results[index].rows.isEmpty ? .failed(.badCredentials) : .ok
            case .receipt(let sequence):
                guard plan.receiptStatement.map(results.indices.contains) == true else { return .failed(.internalError) }
                return written.contains(sequence) ? .ok : nil
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
    private func finished(_ batch: [Pending], outcomes: [WriteOutcome?]?, because error: PostgresError?) {
        inFlight = false
        if let error { onError?(error, batch.count) }
        var tickets: [UInt64] = []
        var delivered: [WriteOutcome] = []
        var again: [Pending] = []
        for (index, pending) in batch.enumerated() {
            if let outcomes, outcomes[index] == nil, case .ack(let sequence, let userID, let deviceID, _, _) = pending.operation {
                if pending.receiptRounds < PostgresGroupCommit.maxReceiptRounds {
                    // Without its row: read afresh before the next group decides it again.
                    // Its FETCH statistics were committed with this group.
                    var retry = pending
                    retry.receiptRounds += 1
                    retry.operation = .ack(sequence: sequence, userID: userID, deviceID: deviceID, fetched: nil, row: nil)
                    again.append(retry)
                    continue
                }
                tickets.append(pending.ticket)
                delivered.append(.failed(.internalError))
                continue
            }
            if let outcomes, case .failed(.unknownUser) = outcomes[index], case .store(let new) = pending.operation,
               !pending.retried, recipients[ExactName(new.user)] != nil {
                recipients[ExactName(new.user)] = nil
                var retry = pending
                retry.retried = true
                again.append(retry)
                continue
            }
            tickets.append(pending.ticket)
            if let outcomes { delivered.append(outcomes[index] ?? .failed(.internalError)) }
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
