/// The clauses that bind each kind of client (SPEC.md's client-side clauses split by who
/// they bind): what `--client device` and `--client provider` report coverage against.
extension SpecClauses {
    /// Rules a device client must follow, as sender or receiver.
    public static let deviceSide: [String] = [
        "2-2", "2-3", "2-4", "2-5", "2-6", "2-7", "2-8", "2-9", "2-10", "2-11", "2-12", "3.1-3", "3.1-4", "3.1-5",
        "3.3-1", "3.3-2", "3.3-3", "3.3-4", "3.3-5", "3.3-6", "3.3-8", "3.4-1", "3.4-2", "3.4-3", "3.4-4", "3.4-5",
        "3.4-6", "3.4-7", "4.1-1", "4.1-2", "4.1-4", "4.2-1", "4.2-2", "4.2-3", "4.3-1", "4.4-1", "4.4-2", "4.4-5",
        "4.5-1", "4.5-2", "4.6-8", "4.8-4", "4.9-2", "4.9-5", "4.13-6", "4.14-1", "4.14-2", "4.14-3", "4.14-4",
        "4.14-10", "4.14-11", "4.14-12", "4.14-13", "4.15-2", "4.17-8", "5.1-1", "5.1-7", "5.2-2", "5.2-3", "5.2-7",
        "5.3-1", "5.3-2", "5.3-3", "5.3-5", "5.4-1", "5.4-2", "5.4-4", "5.4-6", "5.5-2", "5.5-6", "5.6-1", "5.6-2",
        "5.6-3", "5.6-4", "5.8-1", "5.8-2", "5.8-3", "5.8-4", "5.8-5", "6-1", "6-2", "6-3", "6-4", "6-5", "6-6",
        "7.4-7", "7.5-3", "7.5-4", "7.5-5", "7.5-6", "7.6-2", "7.6-5", "7.6-8", "9-1",
    ]

    /// Rules a provider client must follow, as sender or receiver.
    public static let providerSide: [String] = [
        "2-2", "2-3", "2-4", "2-5", "2-6", "2-7", "2-8", "2-9", "2-10", "2-11", "2-12", "3.1-3", "3.1-4", "3.1-5",
        "3.3-1", "3.3-2", "3.3-3", "3.3-4", "3.3-6", "3.3-8", "3.4-1", "3.4-2", "3.4-3", "3.4-4", "3.4-5", "3.4-7",
        "4.1-1", "4.1-2", "4.1-4", "4.2-1", "4.2-2", "4.3-1", "4.4-1", "4.4-2", "4.4-5", "4.5-1", "4.5-2", "4.7-5",
        "4.13-1", "4.13-13", "4.16-12", "4.17-2", "4.17-6", "4.18-2", "4.18-3", "4.18-5", "5.1-1", "5.1-7", "5.2-2",
        "5.2-3", "5.2-7", "5.3-1", "5.3-2", "5.3-3", "5.3-5", "5.4-1", "5.4-2", "5.4-4", "5.4-6", "5.5-2", "5.5-6",
        "5.6-1", "5.6-2", "5.6-3", "5.6-4", "5.8-1", "5.8-2", "5.8-3", "5.8-4", "5.8-5", "6-1", "6-2", "6-3", "6-4",
        "6-5", "6-6", "7.1-1", "7.1-4", "7.1-6", "7.5-2", "7.6-1", "7.6-2", "7.6-3", "7.6-4", "7.6-6", "7.6-7",
        "7.6-8", "8-1", "8-16", "9-1",
    ]

    /// Client-side clauses no client case judges, with the reason.
    static let notJudgedForClients: [String: String] = [
        "4.18-2": "needs a client feature Appendix B does not expose (LOGIN, or sealing)",
        "4.18-3": "needs a client feature Appendix B does not expose (LOGIN, or sealing)",
        "4.18-5": "needs a client feature Appendix B does not expose (LOGIN, or sealing)",
        "4.6-8": "needs a client feature Appendix B does not expose (LOGIN, or sealing)",
        "7.6-1": "needs a client feature Appendix B does not expose (LOGIN, or sealing)",
        "7.6-3": "needs a client feature Appendix B does not expose (LOGIN, or sealing)",
        "7.6-4": "needs a client feature Appendix B does not expose (LOGIN, or sealing)",
        "7.6-6": "needs a client feature Appendix B does not expose (LOGIN, or sealing)",
        "7.6-7": "needs a client feature Appendix B does not expose (LOGIN, or sealing)",
        "8-16": "needs a client feature Appendix B does not expose (LOGIN, or sealing)",
    ]

    static func bindsClient(_ clause: String, _ kind: ClientKind) -> Bool {
        switch kind {
        case .device: deviceSide.contains(clause)
        case .provider: providerSide.contains(clause)
        }
    }
}
