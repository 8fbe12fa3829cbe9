import ArgumentParser
import PushSecurity
import PushWire
import PushSession

struct DeviceCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "device",
        abstract: "A device: its registration, a terminal device, login and logout.",
        subcommands: [Enroll.self, Run.self, Login.self, Logout.self])

    struct Enroll: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Issue a signed registration credential (device id, user, tags) into a file only its owner can read.")

        @Option(help: "The deployment directory made by `securepush init`.") var dataDir: String
        @Option(help: "The user the device belongs to.") var user: String
        @Option(help: "The device id (1 to 64 bytes).") var device: String
        @Option(help: "A tag the device subscribes to; repeat for more.") var tag: [String] = []
        @Option(help: "Days until the registration expires.") var days = 365
        @Option(help: "Where to write the credential.") var out: String

        func validate() throws {
            guard !device.isEmpty, device.utf8.count <= 64 else { throw ValidationError("--device must be 1 to 64 bytes") }
            guard !user.isEmpty, user.utf8.count <= 64 else { throw ValidationError("--user must be 1 to 64 bytes") }
            for name in tag where name.isEmpty || name.utf8.count > 64 || name.contains("\n") {
                throw ValidationError("a tag is 1 to 64 bytes without newlines: \(name.debugDescription)")
            }
            guard (1...36_500).contains(days) else { throw ValidationError("--days must be 1 to 36500") }
        }

        func run() throws {
            let deployment = try openDeployment(dataDir)
            let now = Clocks.wallMilliseconds()
            let registration = Registration(deviceID: device, user: user, tags: tag, issuedAt: now,
                                            expiresAt: now + UInt64(days) * 86_400_000)
            let signer = CredentialSigner(serverKey: deployment.serverKey, purpose: CredentialSigner.registrationPurpose)
            let credential = registration.signed(by: signer)
            // The limit keeps the whole HELLO within the 1,024 bytes a server reads before
            // HELLO_OK ([7.4-3], [5.1-7]).
            guard credential.count <= Registration.maxSignedBytes else {
                throw CommandFailure("the registration is \(credential.count) bytes; at most \(Registration.maxSignedBytes) fit in the HELLO a server reads before HELLO_OK: use fewer tags")
            }
            do {
                try Deployment.writePrivate(out, credential.hexString + "\n")
            } catch {
                throw CommandFailure("cannot write \(out): \(error)")
            }
            announce("enrolled device \(device) for user \(user) in \(out)")
        }
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
