import PushEventLoop
import PushPostgres
import PushStoreLogic

/// Writes the limits every store of a database shares, the login limits ([8-10], [8-11],
/// [8-12]) and the windows of refused tokens ([8-9]), by compare-and-set: the rule decides
/// in Swift (`LoginLimitState.after`, `FailureWindow.merged`) from the values read, the
/// database keeps the decided values only where it still holds the values read, and a
/// write that finds them changed (another attempt, here or at another store, got there
/// first) has the row read again and the rule decide again. Several stores then count
/// every failure without the database computing anything.
///
/// The statements go on the write connection, each its own transaction, between the
/// group commits (as the sweep's do): nothing waits for them, as nothing waited for the
/// writes they replace. Loop-confined.
final class PostgresLimitWriter {
    private let link: PostgresLink
    private let limits: LoginThrottle.Settings
    private let tokenWindowMs: UInt64
    private let clock: @Sendable () -> UInt64
    private var inFlight = 0
    /// Called whenever nothing is in flight any more.
    var onIdle: (() -> Void)?
    /// Told why a write failed, or gave up (for the log).
    var onError: ((_ problem: String) -> Void)?

    /// Rounds of read, decide and write at most for one write: each lost round means
    /// another write succeeded, so this bounds a burst, not progress.
    static let maxRounds = 64

    init(link: PostgresLink, limits: LoginThrottle.Settings, tokenWindowMs: UInt64, clock: @escaping @Sendable () -> UInt64) {
        self.link = link
        self.limits = limits
        self.tokenWindowMs = tokenWindowMs
        self.clock = clock
    }

    var isIdle: Bool { inFlight == 0 }

    // MARK: login limits

    /// A LOGIN's outcome, as the store decided it from what it last knew of the pair.
    func write(_ change: LoginLimitChange) {
        begin()
        write(change, budgetSettled: false, round: 1)
    }

    /// `budgetSettled`: an earlier round wrote the budget, or found the pair as it was read
    /// and so confirmed that it was to be left alone; it is not decided again.
    private func write(_ change: LoginLimitChange, budgetSettled: Bool, round: Int) {
        guard let statement = PostgresWriteStatements.loginLimits(change) else { return end() }
        run(statement) { [self] result in
            let written: (pair: Bool, budget: Bool)
            do throws(PostgresError) {
                let rows = try result.get()
                written = (try rows.int64(0, 0) > 0, try rows.int64(0, 1) > 0)
            } catch {
                return fail("login limits not written: \(error)")
            }
            let pairLeft = change.changesPair && !written.pair
            // Whether a failure charges the budget depends on the pair's trust: a budget
            // left alone is settled only once the pair was found as it was read.
            let budgetLeft = !budgetSettled && (change.changesBudget ? !written.budget : pairLeft)
            guard pairLeft || budgetLeft else { return end() }
            guard round < PostgresLimitWriter.maxRounds else { return fail("login limits not written: changed \(round) times") }
            readLoginLimits(change.key) { [self] current in
                guard let current else { return end() }
                write(change.redecided(from: current, pair: pairLeft, budget: budgetLeft, limits), budgetSettled: !budgetLeft,
                      round: round + 1)
            }
        }
    }

    private func readLoginLimits(_ key: LoginLimitKey, then next: @escaping (LoginLimitState?) -> Void) {
        let reads = StoreReads(loginLimits: key)
        guard let statement = PostgresReadStatement(reads) else { return next(nil) }
        run(PostgresStatement(statement.sql, statement.parameters, prepared: true)) { [self] result in
            do {
                next(try statement.decode(try result.get(), reads: reads) { _, _, _, _ in [] }.loginLimits)
            } catch {
                fail("login limits not read: \(error)")
            }
        }
    }

    // MARK: refused tokens

    /// A store's windows of refused tokens, merged with the database's by the rule.
    func write(_ windows: [KeyedFailureWindow]) {
        guard !windows.isEmpty else { return }
        begin()
        merge(Dictionary(windows.map { ($0.key, $0.window) }, uniquingKeysWith: { first, _ in first }), round: 1)
    }

    private func merge(_ windows: [String: FailureWindow], round: Int) {
        run(PostgresWriteStatements.readTokenWindows(Array(windows.keys))) { [self] result in
            var held: [String: FailureWindow] = [:]
            do throws(PostgresError) {
                let rows = try result.get()
                for row in rows.rows.indices {
                    held[try rows.text(row, 0)] = FailureWindow(startMs: try rows.uint(row, 1), failures: Int(clamping: try rows.int64(row, 2)))
                }
            } catch {
                return fail("refused tokens not read: \(error)")
            }
            let now = clock()
            var writes: [PostgresWriteStatements.WindowWrite] = []
            for (key, window) in windows {
                let before = held[key]
                guard let after = FailureWindow.merged(before, window, nowMs: now, windowMs: tokenWindowMs), after != before else { continue }
                writes.append(.init(key: key, before: before, after: after))
            }
            let statements = PostgresWriteStatements.tokenWindows(writes)
            guard !statements.isEmpty else { return end() }
            var written = Set<String>()
            var answered = 0
            var failed = false
            for statement in statements {
                run(statement) { [self] result in
                    answered += 1
                    do throws(PostgresError) {
                        let rows = try result.get()
                        for row in rows.rows.indices { written.insert(try rows.text(row, 0)) }
                    } catch {
                        failed = true
                        onError?("refused tokens not written: \(error)")
                    }
                    guard answered == statements.count else { return }
                    let tried = Set(writes.map(\.key))
                    let left = windows.filter { key, _ in tried.contains(key) && !written.contains(key) }
                    guard !failed, !left.isEmpty else { return end() }
                    guard round < PostgresLimitWriter.maxRounds else { return fail("refused tokens not written: changed \(round) times") }
                    merge(left, round: round + 1)
                }
            }
        }
    }

    // MARK: forgetting

    /// Budgets read per sweep, oldest first.
    static let budgetPruneBatch = 5_000

    /// Forgets the address budgets that have refilled ([8-11]), as the rule decides
    /// (`LoginLimitState.budgetRefilled`), from those changed longest ago.
    func pruneBudgets(nowMs: UInt64) {
        begin()
        run(PostgresWriteStatements.oldestBudgets(before: nowMs, limit: PostgresLimitWriter.budgetPruneBatch)) { [self] result in
            var refilled: [(address: String, creditMs: Int64, updatedMs: UInt64)] = []
            do throws(PostgresError) {
                let rows = try result.get()
                for row in rows.rows.indices {
                    let budget = (address: try rows.text(row, 0), creditMs: try rows.int64(row, 1), updatedMs: try rows.uint(row, 2))
                    if LoginLimitState(creditMs: budget.creditMs, creditUpdatedMs: budget.updatedMs).budgetRefilled(atMs: nowMs, limits) {
                        refilled.append(budget)
                    }
                }
            } catch {
                return fail("login budgets not read: \(error)")
            }
            guard !refilled.isEmpty else { return end() }
            run(PostgresWriteStatements.deleteBudgets(refilled)) { [self] result in
                if case .failure(let error) = result { return fail("login budgets not pruned: \(error)") }
                end()
            }
        }
    }

    // MARK: the connection

    private func run(_ statement: PostgresStatement, _ completion: @escaping (Result<PostgresResult, PostgresError>) -> Void) {
        link.use { connection, error in
            guard let connection else {
                completion(.failure(error ?? PostgresError(kind: .connection, message: "no database connection")))
                return
            }
            connection.query(statement, completion: completion)
        }
    }

    private func begin() { inFlight += 1 }

    private func end() {
        inFlight -= 1
        if inFlight == 0 { onIdle?() }
    }

    private func fail(_ problem: String) {
        onError?(problem)
        end()
    }
}
