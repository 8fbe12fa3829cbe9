import PushSecurity
import Synchronization

/// What every loop of one store process shares, behind one lock (any thread): the login
/// and token limits, so that a store on N loops does not allow N times the failures
/// ([8-5]), and the FETCH statistics not yet written, so a STATUS counts FETCHes made on
/// any loop. Provider and gateway credentials are accepted once in the whole process
/// ([7.1-5]). A store on one loop has one of its own.
public final class StoreProcessState: Sendable {
    struct Guarded {
        var logins: LoginThrottle
        /// BAD_TOKEN answers per client address: forged tokens are tried in bulk otherwise.
        var badTokens: FailureWindowLimiter
        /// FETCH statistics not yet handed to the writer, by payload sequence ([4.8-3]).
        var fetchTallies: [UInt64: FetchTally] = [:]
        /// Idempotency keys of SENDs being committed on any loop ([4.17-6]).
        var sendsInFlight: Set<IdempotencyKey> = []
    }

    let state: Mutex<Guarded>
    let replays = CredentialReplayGuard()

    public init(settings: StoreSettings) {
        state = Mutex(Guarded(
            logins: LoginThrottle(LoginThrottle.Settings(settings)),
            badTokens: FailureWindowLimiter(limit: settings.badTokensPerAddress, windowMs: settings.badTokenWindowMs)))
    }
}
