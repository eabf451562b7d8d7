package stack

// NoFunctionURLRegions are the regions without Lambda function URLs
// (AWS::Lambda::Url), where the stack deploys only with -c trigger=false.
//
// Source of truth: cfn-lint's region specifications (the CloudFormation
// resource specifications AWS publishes per region); TestCfnLintRegions
// lints the synthesized template for every region cfn-lint knows and checks
// that this list is exactly where it finds no AWS::Lambda::Url. Lambda's
// developer guide ("Creating and managing Lambda function URLs") names the
// first eleven; cfn-lint adds Mexico (Central), China (Ningxia) and the two
// GovCloud regions. Update the list with cfn-lint.
var NoFunctionURLRegions = []string{
	"ap-south-2", "ap-southeast-4", "ap-southeast-5", "ap-southeast-6", "ap-southeast-7", "ap-east-2",
	"ca-west-1", "eu-south-2", "eu-central-2", "il-central-1", "me-central-1",
	"mx-central-1", "cn-northwest-1", "us-gov-east-1", "us-gov-west-1",
}
