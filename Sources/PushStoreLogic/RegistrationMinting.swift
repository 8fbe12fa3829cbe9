import PushSecurity
import PushWire

/// What a database does for `RegistrationMinting`: it persists, and decides nothing.
package protocol RegistrationLedger {
    /// Runs `body` in one transaction, with the registry's changes locked against other
    /// writers where the database needs that: all or none.
    func inTransaction<T>(_ body: () throws -> T) throws -> T
    /// The id of the user named `name`, its row held against a removal until the commit;
    /// nil without such a user.
    func userID(named name: String) throws -> UInt64?
    /// The latest issue time of any registration of `deviceID` kept, enrolled or revoked.
    func latestIssue(of deviceID: String) throws -> UInt64?
    /// Revokes the enrolled registration of `deviceID`: what it was, or nil if none.
    func revoke(_ deviceID: String, nowMs: UInt64) throws -> RegistrationRecord?
    /// Records an enrolled registration and its signed credential.
    func insert(_ registration: Registration, userID: UInt64, credential: [UInt8]) throws -> RegistrationRecord
    /// A failure of the database, as `EnrolmentError.storage` carries it.
    func storageFailure(_ error: any Error) -> any Error & Sendable
}

/// Enrolment ([7.4-1]): checks what a registration may carry, dates, signs and records
/// each one, revoking the earlier registration of its device id. The one minting path of
/// every backend; each backend only persists (`RegistrationLedger`).
package enum RegistrationMinting {
    /// Enrolls `requests` in one transaction, handing each credential to `deliver` before
    /// anything is committed; if any step throws, nothing is recorded.
    package static func enrollAll(_ requests: [EnrolmentRequest], lifetimeMs: UInt64, nowMs: UInt64, signer: CredentialSigner,
                          deliver: (EnrolmentRequest, [UInt8]) throws -> Void,
                          in ledger: some RegistrationLedger) throws(EnrolmentError) -> [Enrolment] {
        for request in requests {
            try validate(user: request.user, deviceID: request.deviceID, tags: request.tags)
        }
        do {
            return try ledger.inTransaction {
                var enrolments: [Enrolment] = []
                var users: [ExactName: UInt64] = [:]
                for request in requests {
                    let userID = try users[ExactName(request.user)] ?? ledger.userID(named: request.user)
                    guard let userID else { throw EnrolmentError.unknownUser(request.user) }
                    users[ExactName(request.user)] = userID
                    let enrolment = try mint(request, userID: userID, lifetimeMs: lifetimeMs, nowMs: nowMs, signer: signer, in: ledger)
                    do {
                        try deliver(request, enrolment.registration.credential)
                    } catch {
                        throw EnrolmentError.notDelivered("\(error)")
                    }
                    enrolments.append(enrolment)
                }
                return enrolments
            }
        } catch let error as EnrolmentError {
            throw error
        } catch {
            throw .storage(ledger.storageFailure(error))
        }
    }

    /// One enrolment, inside the ledger's transaction.
    private static func mint(_ request: EnrolmentRequest, userID: UInt64, lifetimeMs: UInt64, nowMs: UInt64,
                             signer: CredentialSigner, in ledger: some RegistrationLedger) throws -> Enrolment {
        let issuedAt = issueTime(nowMs: nowMs, latest: try ledger.latestIssue(of: request.deviceID))
        let (expiresAt, overflow) = issuedAt.addingReportingOverflow(lifetimeMs)
        let registration = Registration(deviceID: request.deviceID, user: request.user, tags: request.tags, issuedAt: issuedAt,
                                        expiresAt: overflow ? .max : expiresAt)
        let credential = registration.signed(by: signer)
        guard credential.count <= Registration.maxSignedBytes else { throw EnrolmentError.tooLarge(bytes: credential.count) }
        let replaced = try ledger.revoke(request.deviceID, nowMs: nowMs)
        let record = try ledger.insert(registration, userID: userID, credential: credential)
        return Enrolment(registration: record, replaced: replaced)
    }

    /// The issue time for a new enrolment of a device id: now, or one millisecond past the
    /// latest earlier enrolment of that id if that is not before now, so that (device id,
    /// issued_at) names one registration and a token issued for the earlier one is older
    /// than the new one.
    static func issueTime(nowMs: UInt64, latest: UInt64?) -> UInt64 {
        guard let latest else { return nowMs }
        return max(nowMs, latest == .max ? .max : latest + 1)
    }

    /// What a registration may carry ([7.4-1], [7.4-2], [3.3-8]): a device id, a user name and
    /// tags that are each an identifier of 1 to 64 bytes without a control character (the
    /// newline that separates tags among them).
    static func validate(user: String, deviceID: String, tags: [String]) throws(EnrolmentError) {
        do throws(IdentifierError) {
            try Identifier.check(deviceID, as: .deviceID)
            try Identifier.check(user, as: .user)
            for tag in tags { try Identifier.check(tag, as: .tag) }
        } catch {
            throw .invalid(error.description)
        }
    }
}
