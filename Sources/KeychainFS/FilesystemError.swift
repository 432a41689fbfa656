public import SystemPackage
import KernelKeychain

/// A refusal of the filesystem's own (ENOTDIR, EROFS, ENOENT for a missing node...),
/// as the errno a shell user will see.
///
/// The logic throws this for its own decisions and lets the library's `KeychainError`
/// through unchanged; ``SystemPackage/Errno/init(reporting:)`` says which errno either
/// one answers, once, where the bridge turns a failed request into its reply.
public struct FilesystemError: Error, Hashable, Sendable {
    public var errno: Errno
    public init(_ errno: Errno) { self.errno = errno }
}

extension Errno {
    /// The errno the mount answers for a failure of ``KeychainFilesystem``: a
    /// ``FilesystemError``'s own, or for a `KeychainError` EFBIG for a value over 32767
    /// bytes, EDQUOT for the key quota, ENOSPC for a vault whose disk is full, EINVAL for
    /// an empty value, EACCES for the kernel's refusals, ENAMETOOLONG for long names.
    /// Anything else (nothing else is thrown) is EIO, as a request that cannot be
    /// answered otherwise gets.
    ///
    /// The one place a keychain error becomes an errno.
    public init(reporting failure: any Error) {
        switch failure {
        case let refusal as FilesystemError: self = refusal.errno
        case let error as KeychainError: self = Self.answering(error)
        default: self = .ioError
        }
    }

    private static func answering(_ error: KeychainError) -> Errno {
        switch error {
        case .invalidName(_, let problem):
            if case .tooLong = problem { .fileNameTooLong } else { .invalidArgument }
        case .emptyValue, .invalidTimeout, .serviceRequired:
            .invalidArgument
        case .valueTooLarge:
            .fileTooLarge
        case .accessDenied:
            .permissionDenied
        case .quotaExceeded, .notEnoughQuota:
            .diskQuotaExceeded
        case .keyringsUnavailable:
            .noFunction
        case .unreachableFromUserNamespace, .unmappedUserNamespace:
            .notSupported
        case .decodingFailed:
            .ioError
        case .kernel(let underlying):
            underlying.errno
        case .unknownGroup, .unknownUser, .noSuchService, .notShared, .sharedServiceGone:
            .noSuchFileOrDirectory
        case .notInGroup, .sharedReadOnly, .ownerOnly, .sessionOfAnotherUser, .serviceKeyringNameTaken:
            .permissionDenied
        case .memberWriteRefused(_, _, let limit):
            if case .hasDeadline = limit { .permissionDenied } else { .fileTooLarge }
        case .alreadyExists, .sharedServiceCannotBeReplaced:
            .fileExists
        case .sharedByMany, .sharedWithAnotherGroup:
            .invalidArgument
        // The vault: a locked or unsafe vault refuses; a damaged file is an I/O error.
        case .vaultLocked, .vaultLockedForMembersItem, .vaultKeepsForLoginSessions, .vaultNotUnlockedOnThisMachine, .vaultUnsafe, .cannotSwitchUser:
            .permissionDenied
        case .vaultNotInitialized:
            .noSuchFileOrDirectory
        case .vaultAlreadyExists:
            .fileExists
        case .wrongPassphrase, .weakPassphrase, .invalidWorkFactor:
            .invalidArgument
        case .vaultFull:
            .noSpace
        case .vaultIOFailed, .vaultMissing, .vaultNotSaved, .vaultCrypto:
            .ioError
        }
    }
}
