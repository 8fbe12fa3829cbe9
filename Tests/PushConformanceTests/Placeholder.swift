import Testing
@testable import PushConformance
