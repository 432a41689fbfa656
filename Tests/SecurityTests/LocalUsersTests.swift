import Foundation
import KCTestSupport
import XCTest

/// The attack tests' own precondition: the throwaway users exist with the groups the
/// tests assume. Every other test in this target skips where this cannot be true.
final class LocalUsersTests: XCTestCase {
    func testTheThrowawayUsersExistWithTheirGroups() throws {
        try XCTSkipUnless(LocalUser.available, "needs root to create the throwaway users")
        for user in LocalUser.allCases {
            let groups = try user.run("id -nG", freshSession: false).output.trimmingCharacters(in: .whitespacesAndNewlines)
            XCTAssertEqual(groups.split(separator: " ").map(String.init).contains(LocalUser.group), user != .carol,
                           "\(user.rawValue): \(groups)")
        }
    }
}
