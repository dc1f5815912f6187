// Package database opens the program's connection pools and its scratch databases.
package database
