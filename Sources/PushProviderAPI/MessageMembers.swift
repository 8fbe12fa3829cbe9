import PushWire

extension ProviderAPIProblem {
    /// A SEND that the protocol's decoder refused (`MessagePost.sendRequest`), told in the
    /// terms of the request: the member of the body, or the header, that carried the field.
    static func refusing(_ error: WireError, in post: MessagePost) -> ProviderAPIProblem {
        let detail: String
        switch error {
        case .controlCharacter(let tag):
            detail = "\(post.member(carrying: tag)) contains a control character: names are UTF-8 without control characters"
        case .fieldTooLong(let tag, let max):
            detail = "\(post.member(carrying: tag)) is longer than \(max) bytes"
        case .badFieldValue(let tag):
            detail = "\(post.member(carrying: tag)) is out of range"
        default:
            detail = "\(error)"
        }
        return ProviderAPIProblem(422, Status.badRequest.name, detail)
    }
}

extension MessagePost {
    /// Where in the request the SEND field `tag` came from.
    func member(carrying tag: FieldTag) -> String {
        switch tag {
        case .user: "recipient"
        case .payload, .payloadToSeal: text != nil ? "text" : "payload"
        case .sealedPayload: "sealed"
        case .ttlSeconds: "ttl_s"
        case .readLimit: "read_limit"
        case .target: push?.tag != nil ? "push.tag" : "push.device"
        case .alert: "push.alert"
        case .priority: "push.priority"
        case .collapseKey: "push.collapse_key"
        case .pushTTLSeconds: "push.ttl_s"
        case .idempotencyKey: "the Idempotency-Key header"
        default: tag.name
        }
    }
}
