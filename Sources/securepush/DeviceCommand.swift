#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import PushClock
import PushSecurity
import PushSession
import PushStore
import PushStoreLogic
import PushWire

struct DeviceCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "device",
        abstract: "A device: its enrolment in the registry, a terminal device, login and logout.",
        discussion: """
        The store's database holds the registry of enrolled devices. A device logs in to the store and \
        connects to a gateway that follows the registry only while it is enrolled; revoking it ends its \
        fetch tokens at once and closes its gateway connection within seconds.
        """,
        subcommands: [Enroll.self, List.self, Revoke.self, Run.self, Login.self, Logout.self])

    struct Enroll: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Enroll a device of an existing user in the registry and write its signed registration (device id, user, tags) into a file only its owner can read.",
            discussion: "Enrolling a device id again revokes its previous registration.")

        @Option(help: "The deployment directory made by `securepush init`.") var dataDir: String
        @Option(help: "The user the device belongs to; it must exist (`securepush user add`).") var user: String
        @Option(help: "The device id: 1 to 64 bytes without control characters, compared as exact bytes.") var device: String
        @Option(help: "A tag the device subscribes to (1 to 64 bytes without control characters); repeat for more.") var tag: [String] = []
        @Option(help: "Days until the registration expires.") var days = 365
        @Option(help: "Where to write the credential.") var out: String

        func validate() throws {
            try checkIdentifier(device, as: .deviceID, "--device")
            try checkIdentifier(user, as: .user, "--user")
            for name in tag { try checkIdentifier(name, as: .tag, "--tag") }
            guard (1...36_500).contains(days) else { throw ValidationError("--days must be 1 to 36500") }
        }

        func run() throws {
            let deployment = try openDeployment(dataDir)
            let signer = CredentialSigner(serverKey: deployment.serverKey, purpose: CredentialSigner.registrationPurpose)
            let registry = try openRegistry(dataDir)
            let enrolment: Enrolment
            do {
                // The file is written inside the enrolment's transaction: if it cannot be,
                // nothing is recorded.
                enrolment = try registry.enroll(user: user, deviceID: device, tags: tag, lifetimeMs: UInt64(days) * 86_400_000,
                                                nowMs: Clocks.wallMilliseconds(), signer: signer) { credential in
                    do {
                        try Deployment.writePrivate(out, credential.hexString + "\n")
                    } catch {
                        throw CommandFailure("cannot write \(out): \(error)")
                    }
                }
            } catch .unknownUser(let name) {
                throw CommandFailure("no user \(name) in \(dataDir): add it first with `securepush user add \(name) --data-dir \(dataDir)`")
            } catch {
                throw CommandFailure("\(error)")
            }
            let replaced = enrolment.replaced.map { " (its registration issued \(localISO8601(milliseconds: $0.issuedAt)) is revoked)" } ?? ""
            announce("enrolled device \(device) for user \(user) in \(out), expires \(localISO8601(milliseconds: enrolment.registration.expiresAt))\(replaced)")
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the registry: device id, user, tags, state (enrolled, expired, revoked), issued and expires (local time, ISO 8601).",
            discussion: "Revoked registrations are listed until they expire.")

        @Option(help: "The deployment directory.") var dataDir: String
        @Option(help: "Only the devices of this user.") var user: String?

        func validate() throws { if let user { try checkIdentifier(user, as: .user, "--user") } }

        func run() throws {
            _ = try openDeployment(dataDir)
            let rows = try openRegistry(dataDir).list(user: user)
            let now = Clocks.wallMilliseconds()
            let table = rows.map { record -> [String] in
                let state = switch record.state {
                case .revoked: "revoked"
                case .enrolled: record.isExpired(nowMs: now) ? "expired" : "enrolled"
                }
                return [record.deviceID, record.user, record.tags.isEmpty ? "-" : record.tags.joined(separator: ","), state,
                        localISO8601(milliseconds: record.issuedAt), localISO8601(milliseconds: record.expiresAt)]
            }
            let header = ["DEVICE", "USER", "TAGS", "STATE", "ISSUED", "EXPIRES"]
            let widths = header.indices.map { column in ([header] + table).map { $0[column].count }.max() ?? 0 }
            for line in [header] + table {
                print(zip(line, widths).map { $0.padded(to: $1) }.joined(separator: "  ").trimmingTrailingSpaces())
            }
            fflush(nil)
        }
    }

    struct Revoke: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Revoke a device's enrolled registration: its fetch tokens stop working and gateways following the registry close its connection.")

        @Argument(help: "The device id.") var deviceID: String
        @Option(help: "The deployment directory.") var dataDir: String

        func validate() throws { try checkIdentifier(deviceID, as: .deviceID, "the device id") }

        func run() throws {
            _ = try openDeployment(dataDir)
            guard let revoked = try openRegistry(dataDir).revoke(deviceID: deviceID, nowMs: Clocks.wallMilliseconds()) else {
                throw CommandFailure("no enrolled device \(deviceID) in \(dataDir) (see `securepush device list --data-dir \(dataDir)`)")
            }
            announce("revoked device \(deviceID) of user \(revoked.user) (registration issued \(localISO8601(milliseconds: revoked.issuedAt)))")
        }
    }
}

/// The registry in a deployment's store database, SQLite or PostgreSQL (created if the
/// store never ran).
func openRegistry(_ dataDir: String) throws -> RegistryAdministering {
    let database = StoreDatabase(try openDeployment(dataDir))
    do {
        return try database.registry()
    } catch {
        throw CommandFailure("cannot open the store database \(database): \(error)")
    }
}

extension String {
    func trimmingTrailingSpaces() -> String {
        var text = self
        while text.last == " " { text.removeLast() }
        return text
    }
}

/// Reads a credential file written by `device enroll`.
func readCredentialFile(_ path: String) throws -> [UInt8] {
    let text: String
    do {
        text = try Deployment.readFile(path)
    } catch {
        throw CommandFailure("\(error)")
    }
    guard let bytes = [UInt8](hex: text.filter { !$0.isWhitespace }), !bytes.isEmpty else {
        throw CommandFailure("\(path) is not a securepush credential file")
    }
    return bytes
}
