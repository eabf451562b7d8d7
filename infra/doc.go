// Package infra will hold nodetide's CDK Go app. It is a module of its own so
// the CDK's large dependency tree never enters the Lambda builds.
package infra
