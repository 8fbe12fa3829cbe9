/// The clauses that bind each kind of client: what `--client device` and `--client
/// provider` report their coverage against.
extension SpecClauses {
    /// Rules a device client must follow, judged from its frames and its stdout.
    public static let deviceSide: [String] = [
        "2-2", "2-3", "2-4", "2-5", "2-6", "2-7", "2-9", "2-12", "3.1-4", "3.4-1", "3.4-2", "3.4-6",
        "4.2-2", "4.2-3", "4.3-1", "4.4-2", "4.5-1", "4.5-2", "4.6-8", "4.8-4", "4.9-2",
        "4.14-1", "4.14-2", "4.14-3", "4.14-4", "4.14-10", "4.14-11", "4.14-12", "4.14-13", "4.15-2",
        "5.1-1", "5.1-7", "5.3-1", "5.3-2", "5.3-3", "5.3-5", "5.4-1", "5.4-2", "5.5-2", "5.5-6", "5.6-3", "5.6-4",
        "5.8-1", "5.8-2", "5.8-3", "5.8-4", "5.8-5",
        "6-1", "6-4", "6-6", "7.5-4", "7.6-5",
    ]

    /// Rules a provider client must follow.
    public static let providerSide: [String] = [
        "2-2", "2-3", "2-4", "2-5", "2-6", "2-7", "2-9", "2-12", "3.1-4", "3.4-1", "3.4-2", "4.2-2", "4.3-1", "4.4-2", "4.5-1", "4.5-2",
        "4.17-6", "4.18-5", "5.1-1", "5.1-7", "5.3-1", "5.3-2", "5.3-3", "5.3-5", "5.4-1", "5.4-2", "5.5-2", "5.5-6",
        "5.6-3", "5.6-4", "5.8-1", "5.8-2", "5.8-3", "5.8-4", "5.8-5", "6-1", "6-4", "6-6", "7.1-6",
    ]

    static func bindsClient(_ clause: String, _ kind: ClientKind) -> Bool {
        switch kind {
        case .device: deviceSide.contains(clause)
        case .provider: providerSide.contains(clause)
        }
    }
}
