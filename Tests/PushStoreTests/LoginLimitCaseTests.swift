import Foundation
import PushPostgres
@testable import PushStore
@testable import PushStoreLogic
@testable import PushStorePostgres
import PushTestSupport
import PushWire
import Testing

/// One LOGIN against the login limits of [8-5]: the state its pair and address are in, the
/// moment, and whether its password is right; what the limits decide and what they hold
/// afterwards. The same table runs against the rule (`LoginThrottle`), a store on SQLite
/// (whose loop keeps the limits with that rule) and a database shared by stores, which
/// only writes the values the rule decided (`PostgresWriteStatements.loginLimits`).
struct LoginLimitCase: Sendable, CustomTestStringConvertible {
    var name: String
    var settings = LoginLimitCase.settings
    var address = "198.51.100.7"
    var prior = LoginLimitState()
    var nowMs = LoginLimitCase.t
    var succeeded = false
    var decision = LoginThrottle.Decision.check
    /// Unless refused; a refused LOGIN leaves `prior` as it was.
    var after = LoginLimitState()

    var testDescription: String { name }
    var user: String { "alice" }

    static let t: UInt64 = 10_000_000
    static let day: UInt64 = 86_400_000
    /// A full budget of 5 failures (15000 ms of refill), one back every 3000 ms.
    static let settings = LoginThrottle.Settings(freeFailures: 3, backoffMs: 1_000, maxBackoffMs: 8_000, failuresPerAddress: 5,
                                                 refillMs: 3_000, trustedForMs: day)

    /// What the limits hold afterwards, or `prior` if refused.
    var expected: LoginLimitState { decision == .check ? after : prior }
}

/// The cases, each citing the clause it follows.
let loginLimitCases: [LoginLimitCase] = {
    let t = LoginLimitCase.t, day = LoginLimitCase.day
    let settings = LoginLimitCase.settings
    func with(_ change: (inout LoginThrottle.Settings) -> Void) -> LoginThrottle.Settings {
        var changed = settings
        change(&changed)
        return changed
    }
    return [
        LoginLimitCase(name: "[8-10] [8-11] a first failure counts for the pair and takes one from the address's budget",
                       after: LoginLimitState(failures: 1, lastAttemptMs: t, creditMs: 12_000, creditUpdatedMs: t)),
        LoginLimitCase(name: "[8-12] a success trusts the pair and takes nothing", succeeded: true,
                       after: LoginLimitState(trustedUntilMs: t + day)),
        LoginLimitCase(name: "[8-10] the failure that uses up the free ones holds the pair back",
                       prior: LoginLimitState(failures: 2, lastAttemptMs: t - 10, creditMs: 9_000, creditUpdatedMs: t - 10),
                       after: LoginLimitState(failures: 3, blockedUntilMs: t + 1_000, lastAttemptMs: t, creditMs: 6_010, creditUpdatedMs: t)),
        LoginLimitCase(name: "[4.6-3] [8-10] a pair held back is refused until its wait is over",
                       prior: LoginLimitState(failures: 3, blockedUntilMs: t + 500, lastAttemptMs: t - 500, creditMs: 6_000,
                                              creditUpdatedMs: t - 500),
                       decision: .refuse(retryAfterMs: 500)),
        LoginLimitCase(name: "[8-10] the wait doubles with each further failure",
                       prior: LoginLimitState(failures: 4, blockedUntilMs: t, lastAttemptMs: t - 2_000),
                       after: LoginLimitState(failures: 5, blockedUntilMs: t + 4_000, lastAttemptMs: t, creditMs: 12_000, creditUpdatedMs: t)),
        LoginLimitCase(name: "[8-10] the wait stops at its cap",
                       prior: LoginLimitState(failures: 6, blockedUntilMs: t - 1, lastAttemptMs: t - 1_001),
                       after: LoginLimitState(failures: 7, blockedUntilMs: t + 8_000, lastAttemptMs: t, creditMs: 12_000, creditUpdatedMs: t)),
        LoginLimitCase(name: "[8-10] a clock stepped back behind the pair's last failure starts the pair afresh",
                       prior: LoginLimitState(failures: 5, blockedUntilMs: t + 9_000, lastAttemptMs: t + 5_000),
                       after: LoginLimitState(failures: 1, lastAttemptMs: t, creditMs: 12_000, creditUpdatedMs: t)),
        // Two stores' failures of one pair, written in the other order than their clocks
        // read: the pair started afresh at the earlier one and never reached its limit.
        LoginLimitCase(name: "[8-10] a last failure a little later than now (another store's clock, an attempt written first) counts on",
                       prior: LoginLimitState(failures: 2, lastAttemptMs: t + 10),
                       after: LoginLimitState(failures: 3, blockedUntilMs: t + 1_000, lastAttemptMs: t + 10, creditMs: 12_000,
                                              creditUpdatedMs: t)),
        LoginLimitCase(name: "[4.6-3] [8-10] a pair held back by a store whose clock is a little ahead is refused here too",
                       prior: LoginLimitState(failures: 3, blockedUntilMs: t + 1_010, lastAttemptMs: t + 10),
                       decision: .refuse(retryAfterMs: 1_010)),
        LoginLimitCase(name: "[4.6-3] [8-11] an address with less than one failure left is refused for the refill it lacks",
                       prior: LoginLimitState(creditMs: 2_000, creditUpdatedMs: t), decision: .refuse(retryAfterMs: 1_000)),
        LoginLimitCase(name: "[8-11] a budget in debt refills with time, and may go into debt again",
                       prior: LoginLimitState(creditMs: -6_000, creditUpdatedMs: t - 10_000),
                       after: LoginLimitState(failures: 1, lastAttemptMs: t, creditMs: 1_000, creditUpdatedMs: t)),
        LoginLimitCase(name: "[8-11] a budget refills up to full, no further",
                       prior: LoginLimitState(creditMs: 14_000, creditUpdatedMs: t - 60_000),
                       after: LoginLimitState(failures: 1, lastAttemptMs: t, creditMs: 12_000, creditUpdatedMs: t)),
        LoginLimitCase(name: "[8-11] a clock stepped back behind the budget's last change refills nothing for the step",
                       prior: LoginLimitState(creditMs: 3_000, creditUpdatedMs: t + 5_000),
                       after: LoginLimitState(failures: 1, lastAttemptMs: t, creditMs: 0, creditUpdatedMs: t)),
        LoginLimitCase(name: "[8-12] a trusted pair's failure takes nothing from an empty budget",
                       prior: LoginLimitState(creditMs: 0, creditUpdatedMs: t - 1, trustedUntilMs: t + 1_000),
                       after: LoginLimitState(failures: 1, lastAttemptMs: t, creditMs: 0, creditUpdatedMs: t - 1, trustedUntilMs: t + 1_000)),
        LoginLimitCase(name: "[8-12] a trust that has run out no longer spares the budget",
                       prior: LoginLimitState(trustedUntilMs: t),
                       after: LoginLimitState(failures: 1, lastAttemptMs: t, creditMs: 12_000, creditUpdatedMs: t, trustedUntilMs: t)),
        LoginLimitCase(name: "[8-10] [8-12] a success after the wait clears the pair and leaves the budget",
                       prior: LoginLimitState(failures: 4, blockedUntilMs: t - 1, lastAttemptMs: t - 2_000, creditMs: 3_000,
                                              creditUpdatedMs: t - 2_000),
                       succeeded: true,
                       after: LoginLimitState(creditMs: 3_000, creditUpdatedMs: t - 2_000, trustedUntilMs: t + day)),
        LoginLimitCase(name: "[8-12] a trusted user logs in from an address deep in debt, and its trust is renewed",
                       prior: LoginLimitState(creditMs: -30_000, creditUpdatedMs: t, trustedUntilMs: t + 1_000), succeeded: true,
                       after: LoginLimitState(creditMs: -30_000, creditUpdatedMs: t, trustedUntilMs: t + day)),
        // The rule took the later success's trust and the SQL the longer one: both now keep
        // the longer, so successes at stores with slightly different clocks agree in any order.
        LoginLimitCase(name: "[8-12] a success never shortens a trust already given (a clock stepped back)",
                       prior: LoginLimitState(trustedUntilMs: t + 2 * day), succeeded: true,
                       after: LoginLimitState(trustedUntilMs: t + 2 * day)),
        LoginLimitCase(name: "[8-10] with no free failures the first failure waits twice the backoff",
                       settings: with { $0.freeFailures = 0 },
                       after: LoginLimitState(failures: 1, blockedUntilMs: t + 2_000, lastAttemptMs: t, creditMs: 12_000, creditUpdatedMs: t)),
        LoginLimitCase(name: "[8-10] with one free failure the first failure waits the backoff",
                       settings: with { $0.freeFailures = 1 },
                       after: LoginLimitState(failures: 1, blockedUntilMs: t + 1_000, lastAttemptMs: t, creditMs: 12_000, creditUpdatedMs: t)),
        // The rule shifted the backoff left, which wrapped 2^30 doubled 40 times to no wait
        // at all; the SQL computed in numeric and kept the cap. The rule saturates now.
        LoginLimitCase(name: "[8-10] a backoff doubled past 64 bits holds the pair for the cap",
                       settings: with {
                           $0.freeFailures = 1
                           $0.backoffMs = 1 << 30
                           $0.maxBackoffMs = 1 << 40
                       },
                       prior: LoginLimitState(failures: 40, blockedUntilMs: t - 1, lastAttemptMs: t - 1),
                       after: LoginLimitState(failures: 41, blockedUntilMs: t + (1 << 40), lastAttemptMs: t, creditMs: 12_000,
                                              creditUpdatedMs: t)),
        LoginLimitCase(name: "[8-11] with no budget per address every pair that is not trusted is held back",
                       settings: with { $0.failuresPerAddress = 0 }, decision: .refuse(retryAfterMs: 3_000)),
        LoginLimitCase(name: "[8-12] with no budget per address a trusted pair still logs in",
                       settings: with { $0.failuresPerAddress = 0 }, prior: LoginLimitState(trustedUntilMs: t + 1), succeeded: true,
                       after: LoginLimitState(trustedUntilMs: t + day)),
        LoginLimitCase(name: "[8-11] IPv6 addresses count by their /64", address: "2001:db8:1:2:aaaa::1",
                       prior: LoginLimitState(creditMs: 2_000, creditUpdatedMs: t), decision: .refuse(retryAfterMs: 1_000)),
    ]
}()

/// A pair with no failures and no wait limits nothing, whenever its last attempt was:
/// `LoginThrottle` keeps no such pair, a database keeps its row (for the trust it holds).
func comparable(_ state: LoginLimitState) -> LoginLimitState {
    var state = state
    if state.failures == 0 && state.blockedUntilMs == 0 { state.lastAttemptMs = 0 }
    return state
}

@Suite("Login limits: one case table for the rule and both backends ([8-5])", .ownThread)
struct LoginLimitCaseTests {
    @Test("the rule (LoginThrottle)", arguments: loginLimitCases)
    func rule(_ example: LoginLimitCase) {
        var throttle = LoginThrottle(example.settings)
        throttle.adopt(example.prior, user: example.user, address: example.address)
        let decision = throttle.begin(user: example.user, address: example.address, nowMs: example.nowMs)
        #expect(decision == example.decision)
        if decision == .check {
            throttle.finish(user: example.user, address: example.address, succeeded: example.succeeded, nowMs: example.nowMs)
        }
        #expect(comparable(throttle.state(user: example.user, address: example.address)) == comparable(example.expected))
    }

    /// A store on SQLite keeps the limits on its loops, with the rule: a LOGIN through the
    /// store's logic over a real database, the password right or wrong.
    @Test("a store on SQLite", arguments: loginLimitCases)
    func sqlite(_ example: LoginLimitCase) throws {
        var settings = StoreSettings()
        settings.loginFreeFailures = example.settings.freeFailures
        settings.loginBackoffMs = example.settings.backoffMs
        settings.loginMaxBackoffMs = example.settings.maxBackoffMs
        settings.loginFailuresPerAddress = example.settings.failuresPerAddress
        settings.loginFailureRefillMs = example.settings.refillMs
        settings.loginTrustedForMs = example.settings.trustedForMs
        let shared = StoreProcessState(settings: settings)
        let store = try StoreFixture(settings: settings, shared: shared)
        store.now = 1_000
        try store.enroll("phone")
        shared.state.withLock { $0.logins.adopt(example.prior, user: example.user, address: example.address) }
        store.now = example.nowMs
        let session = StoreSession(peerAddress: example.address, role: .device)
        let login = Login(user: example.user, password: Array((example.succeeded ? "pw-alice" : "wrong").utf8), deviceID: "phone")
        switch (store.begin(.login(login), session: session), example.decision) {
        case (.verifyPassword, .check):
            let result = store.finishLogin(login, passwordMatched: example.succeeded, session: session)
            if example.succeeded {
                guard case .loginOK = result.reply else { Issue.record("a right password got \(result.reply)"); return }
            } else {
                #expect(result.reply == .error(ErrorReply(status: .badCredentials, message: "unknown user or wrong password")))
            }
        case (.reply(.error(let error)), .refuse(let waitMs)):
            #expect(error == ErrorReply(status: .rateLimited, message: "too many failed logins; try again in \((waitMs + 999) / 1000) s"))
        case (let action, let decision):
            Issue.record("expected \(decision), the store did \(action)")
        }
        let after = shared.state.withLock { $0.logins.state(user: example.user, address: example.address) }
        #expect(comparable(after) == comparable(example.expected))
    }

    /// Every store of a PostgreSQL database reads the limits with the LOGIN, decides with
    /// the rule, and counts the outcome with one atomic statement: the state the database
    /// holds afterwards must be the rule's. One database, emptied between cases.
    @Test("a store on PostgreSQL", .enabled(if: PostgresCluster.testsEnabled))
    func postgres() throws {
        let database = try PostgresDeployment(users: false)
        for example in loginLimitCases {
            _ = try database.sql("DELETE FROM login_pairs")
            _ = try database.sql("DELETE FROM login_budgets")
            let key = LoginLimitKey(user: example.user, address: LoginThrottle.addressKey(example.address))
            let prior = example.prior
            if prior.failures > 0 || prior.blockedUntilMs > 0 || prior.lastAttemptMs > 0 || prior.trustedUntilMs > 0 {
                _ = try database.sql("""
                    INSERT INTO login_pairs (user_name, address, failures, blocked_until, last_attempt, trusted_until)
                    VALUES ($1, $2, $3, $4, $5, $6)
                    """, [.text(key.user), .text(key.address), .int(prior.failures), .uint(prior.blockedUntilMs),
                          .uint(prior.lastAttemptMs), .uint(prior.trustedUntilMs)])
            }
            if let credit = prior.creditMs {
                _ = try database.sql("INSERT INTO login_budgets (address, credit_ms, updated_ms) VALUES ($1, $2, $3)",
                                     [.text(key.address), .int64(credit), .uint(prior.creditUpdatedMs)])
            }
            var throttle = LoginThrottle(example.settings)
            let decision = throttle.begin(user: example.user, address: example.address, nowMs: example.nowMs,
                                          shared: try limits(key, in: database))
            #expect(decision == example.decision, "\(example.name)")
            if decision == .check {
                let change = throttle.finish(user: example.user, address: example.address, succeeded: example.succeeded,
                                             nowMs: example.nowMs)
                if let statement = PostgresWriteStatements.loginLimits(change) {
                    let written = try database.sql(statement.sql, statement.parameters)
                    #expect(written.rows == [[.int64(change.changesPair ? 1 : 0), .int64(change.changesBudget ? 1 : 0)]],
                            "\(example.name): nothing else wrote, so every part the rule changed is written")
                }
            }
            #expect(comparable(try limits(key, in: database)) == comparable(example.expected), "\(example.name)")
        }
    }

    /// The database binds the rule's values only where it still holds what the rule
    /// started from; a write that finds them changed writes nothing, and the rule decides
    /// again from what the database holds now (`LoginLimitChange.redecided`).
    @Test("[8-10] [8-11] a failure decided from a pair another store changed meanwhile writes nothing, and counts once decided again",
          .enabled(if: PostgresCluster.testsEnabled))
    func compareAndSet() throws {
        let database = try PostgresDeployment(users: false)
        let settings = LoginLimitCase.settings, t = LoginLimitCase.t
        let key = LoginLimitKey(user: "alice", address: "198.51.100.7")
        func fail(from before: LoginLimitState, at now: UInt64) -> LoginLimitChange {
            let attempt = LoginAttempt(key: key, succeeded: false, nowMs: now)
            return LoginLimitChange(attempt: attempt, before: before, after: before.after(attempt, settings))
        }
        func write(_ change: LoginLimitChange) throws -> [PostgresValue] {
            let statement = try #require(PostgresWriteStatements.loginLimits(change))
            return try database.sql(statement.sql, statement.parameters).rows[0]
        }
        // Two stores read the pair before either counted its failure.
        let read = LoginLimitState()
        let first = fail(from: read, at: t), second = fail(from: read, at: t + 1)
        #expect(try write(first) == [.int64(1), .int64(1)])
        #expect(try write(second) == [.int64(0), .int64(0)], "the row is no longer what the second decision started from")
        #expect(try limits(key, in: database) == first.after, "the second failure did not overwrite the first")
        let again = second.redecided(from: try limits(key, in: database), pair: true, budget: true, settings)
        #expect(try write(again) == [.int64(1), .int64(1)])
        let after = try limits(key, in: database)
        #expect(after.failures == 2, "both failures count")
        #expect(after.creditMs == settings.fullCreditMs - 2 * settings.failureCostMs + 1, "both take from the budget (1 ms refilled)")
        // Only the part not yet written is decided again: a budget already charged is not charged twice.
        let pairOnly = fail(from: after, at: t + 2).redecided(from: after, pair: true, budget: false, settings)
        #expect(pairOnly.after.creditMs == after.creditMs && pairOnly.after.failures == 3)
    }

    /// The limits as a store reads them with a LOGIN.
    private func limits(_ key: LoginLimitKey, in database: PostgresDeployment) throws -> LoginLimitState {
        let reads = StoreReads(loginLimits: key)
        guard let statement = PostgresReadStatement(reads) else { throw StoreBackendError("no statement reads the limits") }
        let found = try statement.decode(try database.sql(statement.sql, statement.parameters), reads: reads) { _, _, _, _ in [] }
        return try #require(found.loginLimits)
    }
}
