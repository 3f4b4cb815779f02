// Model generators (being written).
namespace quorum::gen {}
