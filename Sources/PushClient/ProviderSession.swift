import PushWire

/// The commands of a provider session (`ProviderSessionLine`), run pipelined through one
/// `ProviderClient`: each line is sent as it is read, and its answer line is written as its
/// reply arrives, so answers may come out of order; each starts with its command's tag.
/// A line that does not parse is answered `<tag> ERROR INVALID` (`? ERROR INVALID` without
/// a tag) and the session goes on. Once the input has ended and every answer is written,
/// `onFinished` runs. Loop-confined.
public final class ProviderSession {
    private let client: ProviderClient
    private let hasGateway: Bool
    /// Writes one answer line (without its newline); the owner flushes it.
    private let write: (String) -> Void
    /// Why a command failed, for a person (stderr); the answer line says only the status.
    public var onFailure: ((String) -> Void)?
    public var onFinished: (() -> Void)?
    private var outstanding = 0
    private var inputEnded = false
    private var finished = false

    public init(client: ProviderClient, hasGateway: Bool, write: @escaping (String) -> Void) {
        self.client = client
        self.hasGateway = hasGateway
        self.write = write
    }

    /// One line of input, without its newline.
    public func received(_ line: Substring) {
        switch ProviderSessionLine.parse(line) {
        case .success(let command):
            run(command)
        case .failure(let invalid):
            onFailure?("\(invalid.tag ?? "?"): \(invalid.reason)")
            write("\(invalid.tag ?? "?") ERROR INVALID")
        }
    }

    /// The input ended: finish what was started, then `onFinished`.
    public func endOfInput() {
        inputEnded = true
        finishIfDone()
    }

    private func run(_ command: ProviderSessionLine) {
        let tag = command.tag
        switch command.action {
        case .send(let user, let payload, let ttl, let key):
            var message = ProviderClient.SecureMessage(recipient: user, payload: payload)
            if let ttl { message.ttlSeconds = ttl }
            started()
            client.sendThroughStore(message, idempotencyKey: key) { [weak self] in self?.answer(tag, $0.map { "OK \($0.id.hex)" }) }
        case .store(let user, let payload, let ttl):
            var message = ProviderClient.SecureMessage(recipient: user, payload: payload)
            if let ttl { message.ttlSeconds = ttl }
            started()
            client.store(message) { [weak self] in self?.answer(tag, $0.map { "OK \($0.id.hex)" }) }
        case .push(let user, let id):
            guard hasGateway else {
                onFailure?("\(tag): PUSH needs the gateway's address (--gateway)")
                return write("\(tag) ERROR INVALID")
            }
            started()
            let push = Push(target: .user(user), id: id.bytes, alert: true)
            client.push(push) { [weak self] in self?.answer(tag, $0.map { "OK \($0.written) \($0.queued)" }) }
        case .recall(let id):
            started()
            client.recall(id) { [weak self] in self?.answer(tag, $0.map { "OK" }) }
        }
    }

    private func started() { outstanding += 1 }

    private func answer(_ tag: String, _ result: Result<String, ClientError>) {
        outstanding -= 1
        switch result {
        case .success(let text):
            write("\(tag) \(text)")
        case .failure(let error):
            onFailure?("\(tag): \(error)")
            write("\(tag) ERROR \(ProviderSession.answerWord(for: error))")
        }
        finishIfDone()
    }

    /// The word after ERROR: the status's name as section 6 spells it for an answer from a
    /// server, DISCONNECTED when the outcome is unknown or the request could not be made.
    static func answerWord(for error: ClientError) -> String {
        switch error {
        case .status(let status, _), .refused(let status, _): status.name
        case .frameTooLarge: Status.tooLarge.name
        default: "DISCONNECTED"
        }
    }

    private func finishIfDone() {
        guard inputEnded, outstanding == 0, !finished else { return }
        finished = true
        onFinished?()
    }
}
