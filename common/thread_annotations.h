// Clang thread-safety annotations (-Wthread-safety), spelled as in Abseil and leveldb. Under
// other compilers they expand to nothing. Put GUARDED_BY(mu_) on every field a lock protects and
// REQUIRES(mu_) on every method that must be called with it held; a clang build then proves at
// compile time that no access escapes its lock (scripts/test.sh --tsan builds with clang and
// -Wthread-safety -Werror).
//
// std::mutex carries no annotations in libstdc++, so locks that the analysis should see are
// packrat::Mutex (common/mutex.h).
#pragma once

#if defined(__clang__)
#define PACKRAT_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define PACKRAT_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) PACKRAT_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY PACKRAT_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) PACKRAT_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) PACKRAT_THREAD_ANNOTATION(pt_guarded_by(x))
#define ACQUIRED_BEFORE(...) PACKRAT_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define ACQUIRED_AFTER(...) PACKRAT_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define REQUIRES(...) PACKRAT_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define EXCLUDES(...) PACKRAT_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define ACQUIRE(...) PACKRAT_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) PACKRAT_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) PACKRAT_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define ASSERT_CAPABILITY(x) PACKRAT_THREAD_ANNOTATION(assert_capability(x))
#define RETURN_CAPABILITY(x) PACKRAT_THREAD_ANNOTATION(lock_returned(x))
#define NO_THREAD_SAFETY_ANALYSIS PACKRAT_THREAD_ANNOTATION(no_thread_safety_analysis)
