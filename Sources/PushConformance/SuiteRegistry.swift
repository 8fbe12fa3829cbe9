#if canImport(Glibc)
import Glibc
#endif
import PushClock
import PushSecurity
import PushSession
import PushStore
import PushStoreLogic

/// The registry of the store under test, changed the way `securepush device enroll` and
/// `device revoke` change it: in the store's database, next to the running store, which
/// notices within a second. Enrolment is not a protocol message, so this only works when
/// the store keeps its database in the `--data-dir` the suite was given (a securepush
/// store on this host); the cases that need it SKIP otherwise.
///
/// What a run enrolls it revokes at the end, and the throwaway users it adds (a second
/// user for the FORBIDDEN checks) it removes, with their payloads. Used on the run's thread.
final class SuiteRegistry {
    private let registry: RegistryAdministering
    private let users: UserAdministering
    private let signer: CredentialSigner
    private var enrolled: Set<String> = []
    private var addedUsers: [String] = []
    /// The earliest `issued_at` a store accepts in a token of a user or a device this run
    /// made: a user added just after any removal is created up to a second ahead of the
    /// clock (the store's removal fence), and a token must not predate its user ([7.3-3]).
    private var tokensNotBefore: [String: UInt64] = [:]

    /// The earliest `issued_at` a token for `user` on `device` may carry, as LOGIN would
    /// issue it; nil when the run made neither.
    func tokenNotBefore(user: String, device: String) -> UInt64? {
        let bounds = [tokensNotBefore["user:" + user], tokensNotBefore["device:" + device]].compactMap { $0 }
        return bounds.max()
    }

    /// How long the run's registrations last: revoked at the end, they are pruned soon after.
    static let lifetimeMs: UInt64 = 3_600_000

    /// Nil when `keys` name no directory or it holds no store database.
    init?(keys: ConformanceKeys) {
        guard let directory = keys.dataDirectory, let deployment = try? Deployment.open(directory) else { return nil }
        let database = StoreDatabase(deployment)
        // An existing SQLite file only: opening would create an empty database for a store
        // that keeps its own elsewhere.
        if case .sqlite(let path) = database, access(path, F_OK) != 0 { return nil }
        guard let registry = try? database.registry(), let users = try? database.users() else { return nil }
        self.registry = registry
        self.users = users
        signer = CredentialSigner(serverKey: keys.serverKey, purpose: CredentialSigner.registrationPurpose)
    }

    /// Enrolls `device` for `user` (revoking its earlier registration); the registration.
    func enroll(_ device: String, user: String, tags: [String] = []) throws(CaseStop) -> RegistrationRecord {
        do {
            let enrolment = try registry.enroll(user: user, deviceID: device, tags: tags, lifetimeMs: SuiteRegistry.lifetimeMs,
                                                nowMs: Clocks.wallMilliseconds(), signer: signer)
            enrolled.insert(device)
            tokensNotBefore["device:" + device] = enrolment.registration.issuedAt
            return enrolment.registration
        } catch {
            throw .fail("cannot enroll \(device) for \(user) in the store's registry: \(error)")
        }
    }

    func revoke(_ device: String) throws(CaseStop) {
        do {
            guard try registry.revoke(deviceID: device, nowMs: Clocks.wallMilliseconds()) != nil else {
                throw CaseStop.fail("\(device) was not enrolled, so it could not be revoked")
            }
            enrolled.remove(device)
        } catch let stop as CaseStop {
            throw stop
        } catch {
            throw .fail("cannot revoke \(device) in the store's registry: \(error)")
        }
    }

    /// Adds a user nobody can log in as (its password hash is no hash); removed at the end.
    func addThrowawayUser(_ name: String) throws(CaseStop) {
        do {
            guard let added = try users.add(name, passwordHash: "none", nowMs: Clocks.wallMilliseconds()) else {
                throw CaseStop.fail("user \(name) already exists")
            }
            addedUsers.append(name)
            tokensNotBefore["user:" + name] = added.createdAt
        } catch let stop as CaseStop {
            throw stop
        } catch {
            throw .fail("cannot add a second user to the store: \(error)")
        }
    }

    /// Revokes what the run enrolled and removes the users it added; best effort.
    func close() {
        _ = try? registry.revoke(deviceIDs: Array(enrolled), nowMs: Clocks.wallMilliseconds())
        enrolled = []
        for name in addedUsers { _ = try? users.remove(name, clock: Clocks.wallMilliseconds) }
        addedUsers = []
    }
}
