//go:build !unix

package main

import "os"

// fileColumns is 0 where the terminal's width is not asked: COLUMNS, or 80.
func fileColumns(*os.File) int { return 0 }
