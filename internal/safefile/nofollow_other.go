//go:build !unix

package safefile

// noFollow is 0: this platform has no O_NOFOLLOW (Check still refuses a
// link that is there before the file is opened).
const noFollow = 0
